//! `sluice bench rerun DIR`: runs a scenario again with the options saved in
//! `DIR/config.json` by an earlier run, into a new output directory.
//!
//! The password is never saved: the rerun takes it from `--password` / `SLUICE_PASSWORD`
//! (default `password`). A saved `--data-dir` is dropped (it holds the earlier run's
//! clusters, and the scenarios refuse a used one) unless `--data-dir` gives a new one.

use clap::Args;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

use crate::report::scenario_out::{SavedConfig, CONFIG_FILE};
use crate::scenarios::clients::error::RunClientsError;
use crate::scenarios::dcp::error::RunDcpError;
use crate::scenarios::durability::error::RunDurabilityError;
use crate::scenarios::footprint::error::RunFootprintError;
use crate::scenarios::kv::error::RunKvError;
use crate::scenarios::parallel::error::RunParallelError;
use crate::scenarios::query::error::RunQueryError;
use crate::scenarios::replication::error::RunReplicationError;

/// Why a saved run could not be run again: its config.json, or the scenario itself.
#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    #[error("reading {} (written by a run with an output directory)", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("config.json: `args` is not an object")]
    ArgsNotObject,
    /// Putting this run's output and data directories into the saved options.
    #[error("config.json: encoding this run's {option}")]
    Encode {
        option: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "config.json: the {scenario} options do not fit this version of sluice (saved by \
         {version})"
    )]
    Unfit {
        scenario: String,
        version: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: unknown scenario `{scenario}`", path.display())]
    UnknownScenario { path: PathBuf, scenario: String },
    // The scenarios' own errors, boxed: the largest would make every `Result` here large.
    #[error(transparent)]
    Kv(Box<RunKvError>),
    #[error(transparent)]
    Dcp(Box<RunDcpError>),
    #[error(transparent)]
    Replication(Box<RunReplicationError>),
    #[error(transparent)]
    Clients(Box<RunClientsError>),
    #[error(transparent)]
    Parallel(Box<RunParallelError>),
    #[error(transparent)]
    Footprint(Box<RunFootprintError>),
    #[error(transparent)]
    Durability(Box<RunDurabilityError>),
    #[error(transparent)]
    Query(Box<RunQueryError>),
}

#[derive(Debug, Clone, Args)]
pub struct RerunArgs {
    /// The output directory of the earlier run (it holds config.json).
    pub dir: PathBuf,

    /// Where this run writes (default: DIR-rerunN, the first that does not exist yet).
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Data directory for the clusters this run starts, where the scenario has one
    /// (default: temporary directories).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// Password (never saved with the options).
    #[arg(
        long,
        default_value = "password",
        env = "SLUICE_PASSWORD",
        hide_env_values = true
    )]
    pub password: String,
}

/// The saved configuration with this run's output directory, data directory and password
/// put in.
pub fn prepare(
    saved: &SavedConfig,
    out: &Path,
    rerun: &RerunArgs,
) -> Result<SavedConfig, RerunError> {
    let mut args = saved.args.clone();
    let obj = args.as_object_mut().ok_or(RerunError::ArgsNotObject)?;
    let encode = |option| move |source| RerunError::Encode { option, source };
    obj.insert(
        "out".into(),
        serde_json::to_value(out).map_err(encode("--out"))?,
    );
    if obj.contains_key("data_dir") {
        obj.insert(
            "data_dir".into(),
            serde_json::to_value(&rerun.data_dir).map_err(encode("--data-dir"))?,
        );
    }
    if obj.contains_key("username") {
        obj.insert("password".into(), rerun.password.clone().into());
    }
    Ok(SavedConfig {
        scenario: saved.scenario.clone(),
        version: saved.version.clone(),
        args,
    })
}

/// `DIR-rerun1`, `DIR-rerun2`, … : the first that does not exist.
pub fn next_out_dir(dir: &Path) -> PathBuf {
    let base = dir
        .file_name()
        .map_or_else(|| "bench".into(), |n| n.to_string_lossy().into_owned());
    (1u32..)
        .map(|n| dir.with_file_name(format!("{base}-rerun{n}")))
        .find(|p| !p.exists())
        .expect("some rerun number is free")
}

fn args_of<A: DeserializeOwned>(cfg: &SavedConfig) -> Result<A, RerunError> {
    serde_json::from_value(cfg.args.clone()).map_err(|source| RerunError::Unfit {
        scenario: cfg.scenario.clone(),
        version: cfg.version.clone(),
        source,
    })
}

pub async fn run_rerun(rerun: RerunArgs) -> Result<(), RerunError> {
    let path = rerun.dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| RerunError::Read {
        path: path.clone(),
        source,
    })?;
    let saved: SavedConfig = serde_json::from_str(&text).map_err(|source| RerunError::Parse {
        path: path.clone(),
        source,
    })?;
    let out = rerun
        .out
        .clone()
        .unwrap_or_else(|| next_out_dir(&rerun.dir));
    let cfg = prepare(&saved, &out, &rerun)?;
    eprintln!(
        "re-running `{}` from {} into {}",
        cfg.scenario,
        path.display(),
        out.display()
    );
    match cfg.scenario.as_str() {
        "kv" => crate::run_kv(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Kv(Box::new(e)))?,
        "dcp" => crate::run_dcp(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Dcp(Box::new(e)))?,
        "replication" => crate::run_replication(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Replication(Box::new(e)))?,
        "clients" => crate::run_clients(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Clients(Box::new(e)))?,
        "parallel" => crate::run_parallel(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Parallel(Box::new(e)))?,
        "footprint" => crate::run_footprint(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Footprint(Box::new(e)))?,
        "durability" => crate::run_durability(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Durability(Box::new(e)))?,
        "query" => crate::run_query(args_of(&cfg)?)
            .await
            .map_err(|e| RerunError::Query(Box::new(e)))?,
        other => {
            return Err(RerunError::UnknownScenario {
                path,
                scenario: other.to_string(),
            })
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli<A: clap::Args> {
        #[command(flatten)]
        a: A,
    }

    /// Parses `argv` as scenario A's options, saves them as a run would, prepares them for
    /// a rerun and reads them back.
    fn round_trip<A>(argv: &[&str]) -> (serde_json::Value, A)
    where
        A: clap::Args + serde::Serialize + DeserializeOwned,
    {
        let mut all = vec!["bench"];
        all.extend_from_slice(argv);
        let given = Cli::<A>::try_parse_from(all).unwrap().a;
        let tmp = tempfile::tempdir().unwrap();
        crate::report::scenario_out::save_config(tmp.path(), "x", &given).unwrap();
        let text = std::fs::read_to_string(tmp.path().join(CONFIG_FILE)).unwrap();
        assert!(!text.contains("hunter2"), "the password was saved: {text}");
        let saved: SavedConfig = serde_json::from_str(&text).unwrap();
        let rerun = RerunArgs {
            dir: tmp.path().into(),
            out: None,
            data_dir: None,
            password: "hunter2".into(),
        };
        let cfg = prepare(&saved, Path::new("/tmp/new-out"), &rerun).unwrap();
        let back: A = args_of(&cfg).unwrap();
        (serde_json::to_value(&given).unwrap(), back)
    }

    #[test]
    fn every_scenario_comes_back_with_its_options() {
        let (given, back) = round_trip::<crate::ClientsArgs>(&[
            "--cases",
            "7x2x1",
            "--runs",
            "2",
            "--password",
            "hunter2",
            "--data-dir",
            "/tmp/used",
        ]);
        assert_eq!(back.cases[0].users, 7);
        assert_eq!(back.runs, 2);
        assert_eq!(back.login.password, "hunter2");
        assert_eq!(back.cluster.data_dir, None, "the used data dir is dropped");
        assert_eq!(back.out.as_deref(), Some(Path::new("/tmp/new-out")));
        assert_eq!(given["runs"], 2);

        let (_, r) = round_trip::<crate::ReplArgs>(&[
            "--columns",
            "replication,views+xdcr",
            "--rates",
            "1000,2000",
            "--quick",
        ]);
        assert_eq!(r.columns.len(), 2);
        assert_eq!(r.rates, vec![1000.0, 2000.0]);
        assert!(r.quick, "--quick is kept as given");

        let (_, p) = round_trip::<crate::ParallelArgs>(&["--clients", "3", "--nodes", "1"]);
        assert_eq!(p.clients, vec![3]);
        let (_, f) =
            round_trip::<crate::FootprintArgs>(&["--modes", "sockets", "--vs", "memcached"]);
        assert_eq!(f.modes, vec![crate::FootprintMode::Sockets]);
        let (_, k) = round_trip::<crate::KvArgs>(&["--value-bytes", "100"]);
        assert_eq!(k.value_bytes, 100);
        let (_, d) = round_trip::<crate::DcpArgs>(&["--items", "1000"]);
        assert_eq!(d.items, 1000);
    }

    #[test]
    fn reruns_go_to_a_fresh_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("clients");
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(next_out_dir(&dir), tmp.path().join("clients-rerun1"));
        std::fs::create_dir(tmp.path().join("clients-rerun1")).unwrap();
        assert_eq!(next_out_dir(&dir), tmp.path().join("clients-rerun2"));
    }

    #[test]
    fn a_broken_config_is_refused_with_the_reason() {
        let saved = SavedConfig {
            scenario: "clients".into(),
            version: "0.0.1".into(),
            args: serde_json::json!({"runs": "many"}),
        };
        let e = args_of::<crate::ClientsArgs>(&saved).unwrap_err();
        assert!(matches!(e, RerunError::Unfit { .. }), "{e:?}");
        assert!(e.to_string().contains("do not fit"), "{e}");
        let not_object = SavedConfig {
            args: serde_json::json!([1]),
            ..saved
        };
        let rerun = RerunArgs {
            dir: ".".into(),
            out: None,
            data_dir: None,
            password: String::new(),
        };
        assert!(matches!(
            prepare(&not_object, Path::new("o"), &rerun),
            Err(RerunError::ArgsNotObject)
        ));
    }
}
