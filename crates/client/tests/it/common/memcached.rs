//! A real memcached on a free loopback port, killed when the guard drops.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Memcached {
    child: Child,
    pub addr: SocketAddr,
}

impl Memcached {
    /// Starts memcached on a free port. A port found free can be taken by a concurrent test
    /// before memcached binds it (then memcached exits at once, and a readiness check would
    /// connect to the other test's server): so check that our own child is the one running,
    /// and retry on another port if it exited.
    pub fn start() -> Memcached {
        for _ in 0..10 {
            if let Some(m) = Self::try_start() {
                return m;
            }
        }
        panic!("memcached could not start on a free port");
    }

    fn try_start() -> Option<Memcached> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("memcached")
            .args([
                "-u",
                "root",
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("memcached must be installed (apt-get install memcached)");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            if child.try_wait().ok().flatten().is_some() {
                return None; // lost the port
            }
            assert!(
                Instant::now() < deadline,
                "memcached did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Something listens; make sure it is ours (a failed bind exits within milliseconds).
        std::thread::sleep(Duration::from_millis(100));
        if child.try_wait().ok().flatten().is_some() {
            return None;
        }
        Some(Memcached { child, addr })
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
