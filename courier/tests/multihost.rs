//! Localities on different hosts, over TCP: two network namespaces joined
//! by a veth pair stand for two hosts, one locality in each, on a private
//! test subnet that exists only inside those namespaces. The localities
//! are started by hand with the `COURIER_*` variables, as the README says
//! to do across hosts. Skips, saying why, where namespaces cannot be made
//! (not root, no `ip` from iproute2), except under CI, where that fails.

mod common;

use std::process::{Command, Output};

use common::{Rng, checksum};
use courier::{CallFuture, Config};
use serde_bytes::ByteBuf;

/// The network namespace this locality runs in, as the kernel names it.
#[courier::action]
fn net_namespace() -> String {
    net_namespace_here()
}

/// The checksum of a payload, computed where it arrived.
#[courier::action]
fn digest(payload: ByteBuf) -> u64 {
    checksum(&payload)
}

/// Rank 0 runs this; rank 1 joins the job and serves until it ends.
#[test]
#[ignore = "run by two_hosts_over_a_veth_pair inside its namespaces"]
fn multihost_case() {
    courier::launch(Config::new(), |rt| async move {
        assert_eq!(rt.num_localities(), 2);
        let other = rt.locality(1);
        let there = rt.call(other, net_namespace, ()).await?;
        let here = net_namespace_here();
        assert!(!there.is_empty() && there != here, "{here} vs {there}");
        let mut rng = Rng::new(9);
        let mut calls: Vec<(CallFuture<u64>, u64)> = Vec::new();
        for _ in 0..500 {
            let len = if rng.below(50) == 0 {
                1 << 20
            } else {
                rng.below(2000) as usize
            };
            let payload = rng.bytes(len);
            let sum = checksum(&payload);
            calls.push((rt.call(other, digest, (ByteBuf::from(payload),)), sum));
        }
        for (call, sum) in calls {
            assert_eq!(call.await?, sum);
        }
        println!("multihost: locality#0 in {here}, locality#1 in {there}: 500 calls checked");
        Ok(())
    })
    .unwrap();
}

/// The network namespace of this process.
fn net_namespace_here() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Runs `ip ARGS`; the error says what failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces joined by a veth pair; removed on drop.
struct TestHosts {
    names: [String; 2],
}

impl TestHosts {
    /// Hosts `a` (10.213.0.1) and `b` (10.213.0.2) on 10.213.0.0/24.
    fn create() -> Result<TestHosts, String> {
        let id = std::process::id() % 100_000;
        let hosts = TestHosts {
            names: [format!("courier-{id}-a"), format!("courier-{id}-b")],
        };
        let [a, b] = &hosts.names;
        let (va, vb) = (format!("cva{id}"), format!("cvb{id}"));
        ip(&["netns", "add", a])?;
        ip(&["netns", "add", b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", a])?;
        ip(&["link", "set", &vb, "netns", b])?;
        for (ns, dev, addr) in [(a, &va, "10.213.0.1/24"), (b, &vb, "10.213.0.2/24")] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// Runs the case as locality `rank` on host `rank`.
    fn spawn(&self, rank: u32, secret: &str) -> std::process::Child {
        let exe = std::env::current_exe().expect("the test binary's path");
        let listen = format!("10.213.0.{}", rank + 1);
        Command::new("ip")
            .args(["netns", "exec", &self.names[rank as usize]])
            .arg(exe)
            .args([
                "--ignored",
                "--exact",
                "multihost_case",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("COURIER_LOCALITIES", "2")
            .env("COURIER_RANK", rank.to_string())
            .env("COURIER_ROOT", "10.213.0.1:7070")
            .env("COURIER_SECRET", secret)
            .env("COURIER_LISTEN", listen)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("cannot start a locality")
    }
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

fn describe(output: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn two_hosts_over_a_veth_pair() {
    let hosts = match TestHosts::create() {
        Ok(hosts) => hosts,
        Err(why) => {
            common::missing_prerequisite(
                "the two-host test cannot make network namespaces (needs root and iproute2)",
                why,
            );
            return;
        }
    };
    let secret: String = Rng::new(u64::from(std::process::id()))
        .bytes(16)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let root = hosts.spawn(0, &secret);
    let other = hosts.spawn(1, &secret);
    let root = root.wait_with_output().expect("locality 0");
    let other = other.wait_with_output().expect("locality 1");
    assert!(
        root.status.success()
            && String::from_utf8_lossy(&root.stdout).contains("500 calls checked"),
        "locality 0: {}",
        describe(&root)
    );
    assert!(other.status.success(), "locality 1: {}", describe(&other));
}
