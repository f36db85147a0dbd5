//! Counters add up: traffic seen from both ends, task counts, ratios in
//! range, resets, names, printed output.

mod common;

use std::time::Duration;

use common::value;
use courier::counters::CounterFormat;
use courier::{Config, Runtime};

#[courier::action]
fn take(_bytes: [u8; 16]) {}

/// Sends `n` calls with 16 bytes of arguments from locality 0 to 1.
async fn traffic(rt: Runtime, n: u64) -> Result<(), courier::BoxError> {
    for _ in 0..n {
        rt.call(rt.locality(1), take, ([7; 16],)).await?;
    }
    // Sampled on locality 0 itself: no parcel involved.
    let here = rt
        .counters([
            "/parcels{locality#0/total}/count/sent",
            "/parcels{locality#0/total}/count/received",
            "/messages{locality#0/total}/count/sent",
            "/data{locality#0/total}/count/sent",
        ])?
        .evaluate(false)
        .await?;
    assert_eq!(
        value(&here, "/parcels{locality#0/total}/count/sent"),
        n as f64
    );
    assert_eq!(
        value(&here, "/parcels{locality#0/total}/count/received"),
        n as f64
    );
    assert_eq!(
        value(&here, "/messages{locality#0/total}/count/sent"),
        n as f64
    );
    assert_eq!(
        value(&here, "/data{locality#0/total}/count/sent"),
        16.0 * n as f64
    );
    // Sampled on locality 1 by a call that it has received, and not yet
    // answered, when it takes the sample.
    let there = rt
        .counters([
            "/parcels{locality#1/total}/count/received",
            "/parcels{locality#1/total}/count/sent",
            "/serialize{locality#1/total}/count/received",
        ])?
        .evaluate(false)
        .await?;
    assert_eq!(
        value(&there, "/parcels{locality#1/total}/count/received"),
        n as f64 + 1.0
    );
    assert_eq!(
        value(&there, "/parcels{locality#1/total}/count/sent"),
        n as f64
    );
    assert!(value(&there, "/serialize{locality#1/total}/count/received") > 16.0 * n as f64);
    // Per action: the calls of `take`, not the counter queries' own calls.
    let per_action = rt
        .counters([
            "/parcels{locality#0/total}/count/sent@take",
            "/parcels{locality#1/total}/count/received@counters::take",
            "/data{locality#1/total}/count/received@take",
            "/parcels{locality#1/total}/count/received@sample_counters",
        ])?
        .evaluate(false)
        .await?;
    assert_eq!(per_action[0].value, n as f64);
    assert_eq!(per_action[1].value, n as f64);
    assert_eq!(per_action[2].value, 16.0 * n as f64);
    assert_eq!(per_action[3].value, 2.0, "the query above and this one");
    Ok(())
}

#[test]
fn traffic_adds_up_from_both_ends_inproc() {
    courier::launch(common::inproc(2), |rt| traffic(rt, 500)).unwrap();
}

#[test]
fn traffic_adds_up_from_both_ends_tcp() {
    courier::launch(common::tcp("traffic_adds_up_from_both_ends_tcp", 2), |rt| {
        traffic(rt, 500)
    })
    .unwrap();
}

/// Spawns `m` empty tasks here and waits for them.
#[courier::action]
async fn spawn_many(m: u64) {
    let rt = courier::current();
    let tasks: Vec<_> = (0..m).map(|_| rt.spawn(async {})).collect();
    for t in tasks {
        t.await;
    }
}

#[test]
fn task_counts_match_tasks_spawned() {
    const M: u64 = 1000;
    courier::launch(common::inproc(2).workers(1), |rt| async move {
        let mut set = rt.counters([
            "/threads{locality#1/total}/count/cumulative",
            "/threads{locality#1/worker-thread#*}/count/cumulative",
            "/threads{locality#1/total}/background-overhead",
            "/threads{locality#1/total}/idle-rate",
            "/threads{locality#1/total}/time/average-overhead",
        ])?;
        set.reset().await?;
        rt.call(rt.locality(1), spawn_many, (M,)).await?;
        // The M tasks; the task that ran the frame with the call of
        // `spawn_many`, and the task of its own that `spawn_many` continued
        // in once it waited; the task that ran the frame of the reset
        // sample. The task taking a sample is still running, and the
        // tasks that run the frames of the samples before the last one
        // count too. A worker publishes its counts at maintenance points
        // (every 32 tasks, and before background work): a sample taken
        // by a task run right after the last ones may not see them yet,
        // so samples are taken until it does (one did not in CI, 993 of
        // 1,003); none may ever count more.
        let mut samples = 0u64;
        let (values, total) = loop {
            let values = set.evaluate(false).await?;
            let total = value(&values, "/threads{locality#1/total}/count/cumulative");
            let expected = (M + 3 + samples) as f64;
            assert!(total <= expected, "{total} tasks counted, {expected} ran");
            if total == expected || samples == 100 {
                break (values, total);
            }
            samples += 1;
            rt.sleep(std::time::Duration::from_millis(10)).await;
        };
        assert_eq!(total, (M + 3 + samples) as f64);
        let per_worker: f64 = values
            .iter()
            .filter(|v| v.name.contains("worker-thread#"))
            .map(|v| v.value)
            .sum();
        assert_eq!(per_worker, total);
        for ratio in ["background-overhead", "idle-rate"] {
            let v = value(&values, &format!("/threads{{locality#1/total}}/{ratio}"));
            assert!((0.0..=1.0).contains(&v), "{ratio} = {v}");
        }
        assert!(value(&values, "/threads{locality#1/total}/time/average-overhead") >= 0.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn reset_gives_zero_deltas() {
    courier::launch(common::inproc(2), |rt| async move {
        for _ in 0..100 {
            rt.call(rt.locality(1), take, ([1; 16],)).await?;
        }
        let mut set = rt.counters([
            "/threads{locality#0/total}/*",
            "/threads{locality#0/worker-thread#*}/*",
            "/parcels{locality#0/total}/*",
        ])?;
        let before = set.evaluate(true).await?;
        assert!(value(&before, "/parcels{locality#0/total}/count/sent") >= 100.0);
        let after = set.evaluate(false).await?;
        for v in &after {
            assert!(v.value >= 0.0, "negative after reset: {v:?}");
            if v.name.contains("/parcels") {
                assert_eq!(v.value, 0.0, "{v:?}");
            }
        }
        assert_eq!(after[0].sequence, 2);
        Ok(())
    })
    .unwrap();
}

#[test]
fn bad_names_are_clear_errors() {
    courier::launch(common::inproc(2), |rt| async move {
        let err = rt
            .counters(["/threads/count/cumulatve"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did you mean /threads/count/cumulative"),
            "{err}"
        );
        let err = rt.counters(["threads"]).unwrap_err().to_string();
        assert!(err.contains("starts with `/`"), "{err}");
        let err = rt
            .counters(["/threads{locality#9/total}/idle-rate"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("locality#9 does not exist"), "{err}");
        let mut set = rt.counters(["/threads{locality#1/worker-thread#99}/idle-rate"])?;
        let err = set.evaluate(false).await.unwrap_err().to_string();
        assert!(err.contains("no worker-thread#99"), "{err}");
        let mut set = rt.counters(["/parcels{locality#0/worker-thread#0}/count/sent"])?;
        let err = set.evaluate(false).await.unwrap_err().to_string();
        assert!(err.contains("only `total`"), "{err}");
        let mut set = rt.counters(["/parcels{locality#0/total}/count/sent@tkae"])?;
        let err = set.evaluate(false).await.unwrap_err().to_string();
        assert!(
            err.contains("no action named `tkae`") && err.contains("counters::take"),
            "{err}"
        );
        let mut set = rt.counters(["/threads{locality#0/total}/idle-rate@take"])?;
        let err = set.evaluate(false).await.unwrap_err().to_string();
        assert!(err.contains("takes no parameters"), "{err}");
        Ok(())
    })
    .unwrap();
    let err = courier::launch(
        common::inproc(1).print_counter("/no/such/counter"),
        |_rt| async { Ok(()) },
    )
    .unwrap_err();
    assert!(err.to_string().contains("/no/such/counter"), "{err}");
}

/// Runs `main` in a job of `config` that prints its counters to the
/// temporary file `file`; returns what was printed.
fn printed_by<F, Fut>(config: Config, file: &str, main: F) -> String
where
    F: FnOnce(Runtime) -> Fut,
    Fut: std::future::Future<Output = Result<(), courier::BoxError>> + Send + 'static,
{
    let path = std::env::temp_dir().join(format!("courier-{}-{file}", std::process::id()));
    courier::launch(config.print_counter_destination(&path), main).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    text
}

fn printed(format: CounterFormat, file: &str) -> String {
    let config: Config = common::inproc(2)
        .print_counter("/parcels/count/sent")
        .print_counter_reset("/threads{locality#1/total}/count/cumulative")
        .print_counter_interval(Duration::from_millis(10))
        .print_counter_format(format);
    printed_by(config, file, |rt| async move {
        for _ in 0..200 {
            rt.call(rt.locality(1), take, ([0; 16],)).await?;
        }
        std::thread::sleep(Duration::from_millis(50));
        Ok(())
    })
}

#[test]
fn printed_csv_has_a_header_and_parses() {
    let text = printed(CounterFormat::Csv, "out.csv");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("name,sequence,time_s,value,unit,histogram")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.rsplitn(5, ',').collect()).collect();
    assert!(rows.len() >= 3 * 2, "periodic and final prints: {text}");
    for row in &rows {
        let [histogram, _unit, value, time, name_and_seq] = row[..] else {
            panic!("{row:?}")
        };
        value.parse::<f64>().unwrap();
        time.parse::<f64>().unwrap();
        assert!(histogram.is_empty(), "{row:?}");
        let (name, seq) = name_and_seq.rsplit_once(',').unwrap();
        assert!(name.starts_with("\"/") && name.ends_with('"'), "{name}");
        seq.parse::<u64>().unwrap();
    }
    let last_sent = text
        .lines()
        .rfind(|l| l.starts_with("\"/parcels{locality#0/total}/count/sent\""))
        .unwrap();
    let sent: f64 = last_sent.split(',').nth(3).unwrap().parse().unwrap();
    assert!(sent >= 200.0, "{last_sent}");
}

#[test]
fn printed_json_is_one_object_per_line() {
    let text = printed(CounterFormat::Json, "out.json");
    let mut seen = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["name"].as_str().unwrap().starts_with('/'));
        assert!(v["value"].is_number() && v["time"].is_number() && v["sequence"].is_u64());
        seen += 1;
    }
    assert!(seen >= 6, "{text}");
}

#[test]
fn printed_text_looks_like_hpx() {
    let text = printed(CounterFormat::Text, "out.txt");
    let line = text.lines().next().unwrap();
    let parts: Vec<&str> = line.split(',').collect();
    assert!(
        parts[0].starts_with("/parcels{locality#0/total}/count/sent"),
        "{line}"
    );
    assert_eq!(parts[3], "[s]", "{line}");
    parts[1].parse::<u64>().unwrap();
    parts[2].parse::<f64>().unwrap();
    parts[4].parse::<f64>().unwrap();
}

/// Sends an HTTP GET and returns the status line and the body.
fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: courier\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// Checks `body` with Prometheus's own parser, `promtool check metrics`.
/// CI installs promtool (Debian package `prometheus`); elsewhere the check
/// is skipped with a note unless `CI` is set (see
/// [`common::missing_prerequisite`]).
fn promtool_check(body: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            common::missing_prerequisite(
                "promtool cannot be started (install the prometheus package)",
                e,
            );
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool rejected the exposition: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn metrics_endpoint_serves_prometheus_text() {
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        for _ in 0..50 {
            rt.call(rt.locality(1), take, ([0; 16],)).await?;
        }
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let addr = server.local_addr();
        let (status, body) = std::thread::spawn(move || http_get(addr, "/metrics"))
            .join()
            .unwrap();
        assert!(status.contains("200"), "{status}");
        let (missing, _) = std::thread::spawn(move || http_get(addr, "/nope"))
            .join()
            .unwrap();
        assert!(missing.contains("404"), "{missing}");
        let mut samples = 0;
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap();
            assert!(
                series.starts_with("courier_") && series.ends_with("\"}"),
                "{line}"
            );
            samples += 1;
        }
        assert!(
            body.contains("# TYPE courier_parcels_count_sent_total counter"),
            "{body}"
        );
        let sent = body
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    "courier_parcels_count_sent_total{locality=\"0\",instance=\"total\"} ",
                )
            })
            .unwrap();
        assert!(sent.parse::<f64>().unwrap() >= 50.0, "{sent}");
        // Per action, with an `action` label: exactly the 50 calls of `take`.
        let take_sent = body
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    "courier_parcels_count_sent_total{locality=\"0\",instance=\"total\",action=\"counters::take\"} ",
                )
            })
            .unwrap_or_else(|| panic!("no per-action series in {body}"));
        assert_eq!(take_sent.parse::<f64>().unwrap(), 50.0);
        assert!(body.contains("instance=\"worker-thread#1\""), "{body}");
        assert!(samples > 40, "{body}");
        promtool_check(&body);
        Ok(())
    })
    .unwrap();
}

#[test]
fn derived_counters_combine_other_counters() {
    // Two workers: the main task sleeps on one while the statistics
    // samples run on the other.
    courier::launch(common::inproc(3).workers(2), |rt| async move {
        for l in rt.localities() {
            rt.call(l, take, ([0; 16],)).await?;
        }
        let mut set = rt.counters([
            "/parcels{locality#*/total}/count/sent",
            "/arithmetics/add@/parcels{locality#*/total}/count/sent",
            "/threads{locality#1/total}/time/average",
            "/arithmetics/divide@/threads{locality#1/total}/time/cumulative,/threads{locality#1/total}/count/cumulative",
            "/statistics{/runtime{locality#0/total}/uptime}/max@5",
            "/statistics{/runtime{locality#0/total}/uptime}/min@5",
            "/statistics{/runtime{locality#0/total}/uptime}/stddev@5,4",
        ])?;
        std::thread::sleep(Duration::from_millis(100));
        let v = set.evaluate(false).await?;
        assert_eq!(v.len(), 3 + 1 + 1 + 1 + 3);
        assert_eq!(v[3].value, v[0].value + v[1].value + v[2].value);
        assert_eq!(v[3].unit, "");
        assert_eq!(v[4].value, v[5].value, "average via divide");
        let (max, min, stddev) = (v[6].value, v[7].value, v[8].value);
        assert!(max > min && min > 0.0, "uptime max {max} min {min}");
        assert!(stddev > 0.0 && stddev < max - min, "windowed stddev {stddev}");
        assert_eq!(v[6].unit, "s");
        Ok(())
    })
    .unwrap();
}

#[test]
fn perf_events_count_or_say_they_are_not_supported() {
    courier::launch(common::inproc(1).workers(2), |rt| async move {
        let mut faults = rt.counters(["/perf{locality#0/total}/page-faults"])?;
        let opened = faults.reset().await;
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                rt.spawn(async {
                    let v = vec![1u8; 8 << 20];
                    std::hint::black_box(v.iter().map(|&x| u64::from(x)).sum::<u64>())
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        match opened.and(faults.evaluate(false).await) {
            Ok(v) => assert!(v[0].value > 0.0, "no page faults counted: {v:?}"),
            Err(e) => assert!(e.to_string().contains("not supported"), "{e}"),
        }
        let mut cycles = rt.counters(["/perf{locality#0/worker-thread#1}/cycles"])?;
        match cycles.evaluate(false).await {
            Ok(v) => assert_eq!(v.len(), 1),
            Err(e) => assert!(e.to_string().contains("not supported"), "{e}"),
        }
        // A wildcard skips the events this machine lacks instead of failing.
        rt.counters(["/perf{locality#0/total}/*"])?
            .evaluate(false)
            .await?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn poll_histogram_counts_every_poll() {
    const M: u64 = 500;
    courier::launch(common::inproc(2).workers(1), |rt| async move {
        let mut set = rt.counters([
            "/threads{locality#1/total}/time/poll-distribution@0,100000,10",
            "/threads{locality#1/total}/time/cumulative",
        ])?;
        set.reset().await?;
        rt.call(rt.locality(1), spawn_many, (M,)).await?;
        let v = set.evaluate(false).await?;
        let h = v[0].histogram.as_ref().expect("a histogram");
        assert_eq!(h.counts.len(), 12);
        let total: f64 = h.counts.iter().sum();
        // Every poll lands in exactly one bucket: the M tasks and the one
        // that spawned them (polled at least twice), and the reset sampler.
        assert!(
            (total - v[0].value).abs() < 1e-6,
            "{total} vs {}",
            v[0].value
        );
        assert!(v[0].value >= (M + 3) as f64, "{}", v[0].value);
        assert!(h.counts.iter().all(|&c| c >= 0.0));
        assert_eq!(h.sum, v[1].value, "sum of poll times = time/cumulative");
        assert_eq!(v[0].kind, courier::counters::CounterKind::Histogram);
        let err = rt
            .counters(["/threads/time/poll-distribution@5,1"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("min,max,buckets"), "{err}");
        Ok(())
    })
    .unwrap();
}

/// Prints `names` at the end of a job whose main touches `touch` bytes of
/// fresh memory; returns the printed text.
fn printed_at_end(names: &[&str], touch: usize, file: &str) -> String {
    let mut config: Config = common::inproc(2);
    for name in names {
        config = config.print_counter(*name);
    }
    printed_by(config, file, move |rt| async move {
        let memory = vec![1u8; touch];
        assert_eq!(memory.iter().map(|&b| b as usize).sum::<usize>(), touch);
        rt.call(rt.locality(1), take, ([0; 16],)).await?;
        Ok(())
    })
}

#[test]
fn a_counter_that_cannot_be_read_leaves_the_others_printing() {
    let text = printed_at_end(
        &[
            "/threads{locality#0/worker-thread#99}/count/cumulative",
            "/parcels{locality#0/total}/count/sent",
        ],
        0,
        "unreadable.txt",
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("/parcels{locality#0/total}/count/sent,")),
        "{text}"
    );
    assert!(!text.contains("worker-thread#99"), "{text}");
}

#[test]
fn perf_events_printed_only_at_the_end_cover_the_whole_run() {
    let name = "/perf{locality#0/total}/page-faults";
    let supported = courier::launch(common::inproc(1), move |rt| async move {
        Ok(rt.counters([name])?.evaluate(false).await.is_ok())
    })
    .unwrap();
    if !supported {
        // As in `perf_events_count_or_say_they_are_not_supported`.
        eprintln!("skipping: this kernel refuses perf events");
        return;
    }
    let text = printed_at_end(&[name], 64 << 20, "perf.txt");
    let line = text
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("{name} not printed: {text}"));
    let faults: f64 = line.split(',').nth(4).unwrap().parse().unwrap();
    // 64 MiB of fresh pages: at least 16k faults of 4 KiB (fewer with huge
    // pages, but far above what one call at the end causes).
    assert!(faults > 1000.0, "{line}");
}
