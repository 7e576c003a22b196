//! Opening the load's connections: all at once, each with the full bootstrap (HELLO, SCRAM,
//! bucket, cluster map), each bounded in time.

use sluice_client::{Client, ConnectOptions};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinSet;

use crate::error::BenchError;

/// A connection's bootstrap must finish within this.
pub const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens `n` connections to `addr` at once.
pub async fn connect_all(
    addr: SocketAddr,
    options: &ConnectOptions,
    n: u32,
) -> Result<Vec<Client>, BenchError> {
    let mut tasks = JoinSet::new();
    for _ in 0..n {
        tasks.spawn(tokio::time::timeout(
            BOOTSTRAP_TIMEOUT,
            Client::connect(addr, options.clone()),
        ));
    }
    let mut clients = Vec::with_capacity(n as usize);
    while let Some(joined) = tasks.join_next().await {
        let client = joined
            .map_err(|e| BenchError::Io(std::io::Error::other(e)))?
            .map_err(|_| BenchError::NoBootstrap(BOOTSTRAP_TIMEOUT))??;
        clients.push(client);
    }
    Ok(clients)
}
