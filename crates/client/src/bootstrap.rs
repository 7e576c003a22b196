//! The bootstrap every connection runs, in the order SDKs use:
//! HELLO → SASL_AUTH (→ SASL_STEP …) → SELECT_BUCKET → GET_CLUSTER_CONFIG.
//! Each step runs only when the options ask for it, so the same code serves plain memcached.

use rand::rngs::OsRng;
use sluice_proto::encode::Packet;
use sluice_proto::{Feature, Opcode, Status};
use sluice_sasl::{ClientSession, ClientStep, Mechanism};

use crate::client::Client;
use crate::error::ClientError;
use crate::options::{ConnectOptions, AGENT};

pub(crate) async fn run(client: &mut Client, options: &ConnectOptions) -> Result<(), ClientError> {
    if !options.features.is_empty() {
        hello(client, &options.features).await?;
    }
    if let Some((user, password)) = &options.auth {
        authenticate(client, user, password).await?;
    }
    if let Some(bucket) = &options.bucket {
        let req = Packet::request(Opcode::SelectBucket.byte(), 0, 0).key(bucket.as_bytes());
        client.call(req).await?.into_success()?;
        let config = client.get_cluster_config_bytes().await?;
        let n = crate::cluster_config::num_vbuckets(&config)?;
        client.set_num_vbuckets(n);
    }
    Ok(())
}

async fn hello(client: &mut Client, features: &[Feature]) -> Result<(), ClientError> {
    let codes: Vec<u8> = features
        .iter()
        .flat_map(|f| f.code().to_be_bytes())
        .collect();
    let req = Packet::request(Opcode::Hello.byte(), 0, 0)
        .key(AGENT.as_bytes())
        .value(&codes);
    let resp = client.call(req).await?.into_success()?;
    if resp.value.len() % 2 != 0 {
        return Err(ClientError::Unexpected(
            "HELLO answer is not a list of u16 codes",
        ));
    }
    // Codes this client does not know were not asked for; ignore them rather than fail.
    let agreed = resp
        .value
        .chunks_exact(2)
        .filter_map(|c| Feature::from_u16(u16::from_be_bytes([c[0], c[1]])))
        .collect();
    client.set_negotiated(agreed);
    Ok(())
}

/// SCRAM-SHA512. The exchange only counts as done once `sluice-sasl` has verified the server's
/// signature (`v=`): a server that merely says SUCCESS has not proven it knows the password.
async fn authenticate(client: &mut Client, user: &str, password: &str) -> Result<(), ClientError> {
    let mechanism = Mechanism::ScramSha512;
    let mut session = ClientSession::new(mechanism, user, password, &mut OsRng)?;
    let req = Packet::request(Opcode::SaslAuth.byte(), 0, 0)
        .key(mechanism.name().as_bytes())
        .value(session.initial_message());
    let mut resp = client.call(req).await?;
    // SCRAM is two round trips; the bound only guards against a server that never finishes.
    for _ in 0..4 {
        let status = resp.status()?;
        let step = match status {
            Status::Success | Status::AuthContinue => session.step(&resp.value),
            other => return Err(ClientError::Status(other)),
        };
        match (status, step) {
            (Status::Success, ClientStep::Done) => return Ok(()),
            (Status::AuthContinue, ClientStep::Continue(msg)) => {
                let req = Packet::request(Opcode::SaslStep.byte(), 0, 0)
                    .key(mechanism.name().as_bytes())
                    .value(&msg);
                resp = client.call(req).await?;
            }
            (_, ClientStep::Failure(e)) => return Err(ClientError::Auth(e)),
            (Status::Success, ClientStep::Continue(_)) => {
                return Err(ClientError::Unexpected(
                    "server reported SASL success before the exchange was complete",
                ))
            }
            _ => {
                return Err(ClientError::Unexpected(
                    "server asked to continue a finished SASL exchange",
                ))
            }
        }
    }
    Err(ClientError::Unexpected("SASL exchange did not finish"))
}
