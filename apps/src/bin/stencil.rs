//! HPX's 1-D heat stencil (`1d_stencil`) on N localities: a periodic ring
//! of `--nx` points per locality, `--steps` time steps of
//! `u' = u + k·(left − 2u + right)`. Each locality updates its partition
//! with a parallel loop (`courier::par`, chunks sized by `--chunk`) and
//! exchanges its two edge points with its neighbours through a posted
//! action each step. Every locality then checks its partition against the
//! same ring computed serially: the arithmetic is the same, so the values
//! must be equal to the bit. Prints one `run 1: key=value ...` line.
//!
//! ```text
//! cargo run --release -p courier-apps --bin stencil -- --localities 2
//! stencil --nx 1000000 --steps 100 --chunk auto
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use courier::par::{self, Chunking};
use courier::{BoxError, Runtime, RuntimeArgs};

/// The heat equation's coefficient `k·dt/dx²`.
const K: f64 = 0.4;

/// One point's next value.
#[inline]
fn heat(left: f64, middle: f64, right: f64) -> f64 {
    middle + K * (left - 2.0 * middle + right)
}

/// The initial value of global point `g` (HPX's `1d_stencil` starts from
/// the point's index).
fn initial(g: usize) -> f64 {
    (g % 1000) as f64
}

/// A locality's partition: two buffers of points (as bits, so that chunks
/// of a parallel loop can write their own points), and the edge points
/// its neighbours sent for each step.
struct Partition {
    cells: Arc<[Vec<AtomicU64>; 2]>,
    /// For step `s`: the left ghost in `[s % 2][0]`, the right in `[s % 2][1]`.
    ghosts: [[Ghost; 2]; 2],
}

/// A ghost point and the step it is for (+1; 0 is "none yet").
#[derive(Default)]
struct Ghost {
    step: AtomicU64,
    value: AtomicU64,
}

/// Locality `here`'s partition is global points `here·nx .. (here+1)·nx`.
fn partition(here: usize, nx: usize) -> Partition {
    let cells =
        |f: &dyn Fn(usize) -> f64| (0..nx).map(|i| AtomicU64::new(f(i).to_bits())).collect();
    Partition {
        cells: Arc::new([cells(&|i| initial(here * nx + i)), cells(&|_| 0.0)]),
        ghosts: Default::default(),
    }
}

/// A neighbour's edge point for `step`: `side` 0 is this locality's left
/// ghost, 1 its right.
#[courier::action]
fn set_ghost(step: u64, side: u8, value: f64) {
    courier::with_state(|p: &Partition| {
        let ghost = &p.ghosts[(step % 2) as usize][usize::from(side & 1)];
        ghost.value.store(value.to_bits(), Ordering::Relaxed);
        ghost.step.store(step + 1, Ordering::Release);
    });
}

/// HPX's 1-D heat stencil over Courier.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Points per locality.
    #[arg(long, default_value_t = 1_000_000)]
    nx: usize,
    /// Time steps.
    #[arg(long, default_value_t = 100)]
    steps: u64,
    /// Iterations per task of the partition's loop: `auto` or a number.
    #[arg(long, default_value = "auto")]
    chunk: String,
}

fn chunking(spec: &str) -> Result<Chunking, String> {
    match spec {
        "auto" => Ok(Chunking::Auto),
        n => n
            .parse()
            .map(Chunking::Static)
            .map_err(|e| format!("--chunk {n}: {e} (a number or `auto`)")),
    }
}

/// Waits until the ghost on `side` for `step` has come.
async fn ghost(rt: &Runtime, step: u64, side: usize) -> f64 {
    let ghost = &rt.state::<Partition>().ghosts[(step % 2) as usize][side];
    while ghost.step.load(Ordering::Acquire) != step + 1 {
        courier::yield_now().await;
    }
    f64::from_bits(ghost.value.load(Ordering::Relaxed))
}

/// Runs the stencil on this locality; returns its points after the last
/// step.
async fn run(
    rt: &Runtime,
    nx: usize,
    steps: u64,
    chunking: Chunking,
) -> Result<Vec<f64>, BoxError> {
    let n = rt.num_localities() as usize;
    let here = rt.here().get() as usize;
    let left = rt.locality(((here + n - 1) % n) as u32);
    let right = rt.locality(((here + 1) % n) as u32);
    let state = Arc::clone(&rt.state::<Partition>().cells);
    for step in 0..steps {
        let (old, new) = ((step % 2) as usize, ((step + 1) % 2) as usize);
        let get = |i: usize| f64::from_bits(state[old][i].load(Ordering::Relaxed));
        // My first point is my left neighbour's right ghost, and so on.
        rt.post(left, set_ghost, (step, 1, get(0)))?;
        rt.post(right, set_ghost, (step, 0, get(nx - 1)))?;
        rt.flush();
        let interior = Arc::clone(&state);
        par::for_each(1..nx - 1, chunking, move |i| {
            let at = |j: usize| f64::from_bits(interior[old][j].load(Ordering::Relaxed));
            let next = heat(at(i - 1), at(i), at(i + 1));
            interior[new][i].store(next.to_bits(), Ordering::Relaxed);
        })
        .await;
        let (lg, rg) = (ghost(rt, step, 0).await, ghost(rt, step, 1).await);
        let edge = |i: usize, l: f64, r: f64| {
            state[new][i].store(heat(l, get(i), r).to_bits(), Ordering::Relaxed);
        };
        edge(0, lg, get(1));
        edge(nx - 1, get(nx - 2), rg);
        // Nobody may overwrite this step's ghosts (step + 2) before every
        // locality has read them.
        rt.barrier().await?;
    }
    let last = (steps % 2) as usize;
    Ok(state[last]
        .iter()
        .map(|c| f64::from_bits(c.load(Ordering::Relaxed)))
        .collect())
}

/// The whole ring computed serially: the reference.
fn serial(n: usize, nx: usize, steps: u64) -> Vec<f64> {
    let total = n * nx;
    let mut u: Vec<f64> = (0..total).map(initial).collect();
    let mut next = vec![0.0; total];
    for _ in 0..steps {
        for g in 0..total {
            next[g] = heat(u[(g + total - 1) % total], u[g], u[(g + 1) % total]);
        }
        std::mem::swap(&mut u, &mut next);
    }
    u
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let chunking = match chunking(&cli.chunk) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stencil: {e}");
            return ExitCode::FAILURE;
        }
    };
    if cli.nx < 3 {
        eprintln!("stencil: --nx must be at least 3");
        return ExitCode::FAILURE;
    }
    let (nx, steps) = (cli.nx, cli.steps);
    let config = cli
        .runtime
        .config(2)
        .state(move |here, _| partition(here.get() as usize, nx));
    let label = cli.chunk.clone();
    let result = courier::launch_spmd(config, move |rt| {
        let label = label.clone();
        async move {
            let n = rt.num_localities() as usize;
            rt.barrier().await?;
            let start = Instant::now();
            let mine = run(&rt, nx, steps, chunking).await?;
            let seconds = rt
                .all_reduce(start.elapsed().as_secs_f64(), f64::max)
                .await?;
            let reference = serial(n, nx, steps);
            let offset = rt.here().get() as usize * nx;
            let wrong = mine
                .iter()
                .zip(&reference[offset..offset + nx])
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count() as u64;
            let wrong = rt.all_reduce(wrong, |a, b| a + b).await?;
            if rt.here().get() == 0 {
                let updates = (n * nx) as f64 * steps as f64;
                println!(
                    "run 1: localities={n} nx={nx} steps={steps} chunk={label} \
                     seconds={seconds:.4} points_per_s={:.3e} wrong={wrong}",
                    updates / seconds
                );
            }
            Ok(wrong)
        }
    });
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("stencil: {wrong} points differ from the serial solution");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("stencil: {e}");
            ExitCode::FAILURE
        }
    }
}
