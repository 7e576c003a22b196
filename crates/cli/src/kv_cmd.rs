//! `sluice kv`: read and write single documents through the smart client (`ClusterClient`):
//! routed by the cluster map from any seed, following NOT_MY_VBUCKET and new maps.

use clap::{Args, Subcommand, ValueEnum};
use sluice_client::{
    ClusterClient, ClusterOptions, Durability, DurabilityLevel, MutationResult, StoreOptions,
};
use sluice_types::Cas;
use std::io::Write;
use std::time::Duration;

#[derive(Args)]
pub struct KvArgs {
    /// KV addresses (host:port) to bootstrap from, comma-separated; any member will do.
    #[arg(
        long,
        env = "SLUICE_SEEDS",
        default_value = "127.0.0.1:12000",
        value_delimiter = ','
    )]
    pub seeds: Vec<String>,
    #[command(flatten)]
    pub login: crate::login_args::LoginArgs,
    #[command(subcommand)]
    pub op: KvOp,
}

#[derive(Subcommand)]
pub enum KvOp {
    /// Print a document's value on stdout (exit 1 if it does not exist).
    Get {
        key: String,
        /// Read replica N (0-based) instead of the active copy.
        #[arg(long)]
        replica: Option<u8>,
    },
    /// Store a document (created or replaced); prints its CAS and mutation token.
    Set {
        key: String,
        value: String,
        /// Seconds until it expires (0 = never).
        #[arg(long, default_value_t = 0)]
        expiry: u32,
        /// Acknowledge only once the write is durable at this level.
        #[arg(long, value_enum)]
        durability: Option<LevelArg>,
        /// How long the server may wait for the durability, in milliseconds.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u16).range(1..=65534))]
        durability_timeout_ms: u16,
    },
    /// Delete a document.
    Delete { key: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LevelArg {
    Majority,
    MajorityAndPersistActive,
    PersistToMajority,
}

impl LevelArg {
    pub fn level(self) -> DurabilityLevel {
        match self {
            LevelArg::Majority => DurabilityLevel::Majority,
            LevelArg::MajorityAndPersistActive => DurabilityLevel::MajorityAndPersistOnMaster,
            LevelArg::PersistToMajority => DurabilityLevel::PersistToMajority,
        }
    }
}

pub fn run(args: KvArgs) -> anyhow::Result<bool> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(kv(args))
}

/// `Ok(false)`: the document was not found.
async fn kv(args: KvArgs) -> anyhow::Result<bool> {
    let mut options = ClusterOptions::sluice(
        &args.login.user.username,
        &args.login.user.password,
        &args.login.bucket,
    );
    if let KvOp::Set {
        durability: Some(_),
        durability_timeout_ms,
        ..
    } = &args.op
    {
        // The client waits as long as the server may, plus a margin for the answer.
        options.operation_timeout =
            Duration::from_millis(u64::from(*durability_timeout_ms)) + Duration::from_secs(2);
    }
    let client = ClusterClient::connect(&args.seeds, options).await?;
    match args.op {
        KvOp::Get { key, replica } => {
            let got = match replica {
                Some(i) => client.get_replica(key.as_bytes(), i).await,
                None => client.get(key.as_bytes()).await,
            };
            match got {
                Ok(doc) => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(&doc.value)?;
                    out.write_all(b"\n")?;
                    Ok(true)
                }
                Err(e) if e.is_not_found() => {
                    eprintln!("{key}: not found");
                    Ok(false)
                }
                Err(e) => Err(e.into()),
            }
        }
        KvOp::Set {
            key,
            value,
            expiry,
            durability,
            durability_timeout_ms,
        } => {
            let durability = durability.map(|l| Durability {
                level: l.level(),
                timeout_ms: Some(durability_timeout_ms),
            });
            let opts = StoreOptions {
                expiry,
                durability,
                ..Default::default()
            };
            let m = client.set(key.as_bytes(), value.as_bytes(), opts).await?;
            print_mutation(&m);
            Ok(true)
        }
        KvOp::Delete { key } => match client.delete(key.as_bytes(), Cas::ZERO).await {
            Ok(m) => {
                print_mutation(&m);
                Ok(true)
            }
            Err(e) if e.is_not_found() => {
                eprintln!("{key}: not found");
                Ok(false)
            }
            Err(e) => Err(e.into()),
        },
    }
}

fn print_mutation(m: &MutationResult) {
    match m.token {
        Some(t) => println!(
            "cas={} vb={} vbuuid={} seqno={}",
            m.cas.0, t.vb.0, t.vb_uuid.0, t.seqno.0
        ),
        None => println!("cas={}", m.cas.0),
    }
}
