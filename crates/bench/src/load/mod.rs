//! The load itself, shared by the scenarios: what it is made of, when each request is due,
//! one connection's loop and a timed run over all of them.
//! - `workload`   — the key space, the value, the get/set mix and a tiny seeded RNG;
//! - `pacer`      — the open-loop schedule (sans-IO: instants in, instants out);
//! - `connect`    — opening the load's connections;
//! - `drive`      — one connection's loop, closed or open;
//! - `measure`    — one timed run over all connections; `stop` — ending it early;
//! - `prefill`    — filling the key space before timing;
//! - `latency`    — hdrhistogram recording and the p50/p95/p99/max summary;
//! - `in_process` — the engine called directly from threads, no sockets.

pub mod connect;
pub mod drive;
pub mod in_process;
pub mod latency;
pub mod measure;
pub mod pacer;
pub mod prefill;
pub mod stop;
pub mod workload;
