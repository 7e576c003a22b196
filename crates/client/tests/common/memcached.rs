//! A real memcached on a free loopback port, killed when the guard drops.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Memcached {
    child: Child,
    pub addr: SocketAddr,
}

impl Memcached {
    pub fn start() -> Memcached {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("memcached")
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
            assert!(
                Instant::now() < deadline,
                "memcached did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Memcached { child, addr }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
