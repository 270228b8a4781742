//! tokio peer of tpl's benchmark workloads (see bench/peers/README.md for the protocol):
//!
//!   peer --list                             one "<group>\t<method>" line per method
//!   peer --run <group> <method> [--quick]   warm-up at the quick size, one measured run,
//!                                           one JSON line on stdout
//!   peer --serve <kind> <method>            a server of a server group (servers.rs)
//!
//!   peer --rayon --list / --run ...        the same for the rayon methods (a runtime of its own
//!                                           in the tables: bench/peers/peers.py)
//!
//! Written as a tokio user would: the multi-thread runtime (one worker per core), spawned
//! tasks, JoinHandles, tokio::sync channels; async-channel where an MPMC channel is needed
//! (tokio has none); async-stream and futures' stream combinators for async streams.
//! The fork-join groups also as a rayon user would write them: rayon::join and rayon::scope on
//! rayon's global pool (one thread per core, like tokio's workers).
use futures::StreamExt;
use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod files;
mod servers;

// ---- allocation counter ------------------------------------------------------------------
struct Counting;
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(l.size() as u64, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCATED.fetch_add(n as u64, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

// ---- per-item start times (thread-injection timelines) ------------------------------------
#[derive(Clone)]
struct Recorder(Arc<(Instant, Mutex<Vec<f64>>)>);
impl Recorder {
    fn new() -> Self {
        Recorder(Arc::new((Instant::now(), Mutex::new(Vec::new()))))
    }
    fn start(&self) {
        let ms = self.0 .0.elapsed().as_secs_f64() * 1e3;
        self.0 .1.lock().unwrap().push(ms);
    }
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn pick(quick: bool, full: i64, small: i64) -> i64 {
    if quick { small } else { full }
}

// ---- chain: a task per link awaiting the previous one's JoinHandle -------------------------
async fn chain(n: i64) -> i64 {
    let (tx, rx) = tokio::sync::oneshot::channel::<i64>();
    let mut prev = tokio::spawn(async move { rx.await.unwrap() + 1 });
    for _ in 1..n {
        let p = prev;
        prev = tokio::spawn(async move { p.await.unwrap() + 1 });
    }
    tx.send(0).unwrap();
    prev.await.unwrap()
}

// ---- chain_channels: seed 001's Go program -----------------------------------------------------
async fn chain_mpsc(n: i64) -> i64 {
    let (first_tx, mut final_rx) = tokio::sync::mpsc::channel::<i64>(1);
    let mut right = first_tx;
    for _ in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<i64>(1);
        let out = right;
        tokio::spawn(async move {
            let v = rx.recv().await.unwrap();
            out.send(v + 1).await.unwrap();
        });
        right = tx;
    }
    right.send(0).await.unwrap();
    final_rx.recv().await.unwrap()
}

async fn chain_oneshot(n: i64) -> i64 {
    let (first_tx, final_rx) = tokio::sync::oneshot::channel::<i64>();
    let mut right = first_tx;
    for _ in 0..n {
        let (tx, rx) = tokio::sync::oneshot::channel::<i64>();
        let out = right;
        tokio::spawn(async move {
            let _ = out.send(rx.await.unwrap() + 1);
        });
        right = tx;
    }
    right.send(0).unwrap();
    final_rx.await.unwrap()
}

// ---- skynet ---------------------------------------------------------------------------------
fn skynet(num: i64, size: i64) -> BoxFut<i64> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let sub = size / 10;
        let children: Vec<_> = (0..10).map(|i| tokio::spawn(skynet(num + i * sub, sub))).collect();
        let mut sum = 0;
        for c in children {
            sum += c.await.unwrap();
        }
        sum
    })
}

fn skynet_rayon(num: i64, size: i64) -> i64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let mut sums = [0i64; 10];
    rayon::scope(|s| {
        for (i, slot) in sums.iter_mut().enumerate() {
            s.spawn(move |_| *slot = skynet_rayon(num + i as i64 * sub, sub));
        }
    });
    sums.iter().sum()
}

// ---- fib: binary fork-join, every call with n >= 2 forks one child and runs the other ---------
fn fib(n: i64) -> BoxFut<i64> {
    Box::pin(async move {
        if n < 2 {
            return n;
        }
        let left = tokio::spawn(fib(n - 1));
        let right = fib(n - 2).await;
        left.await.unwrap() + right
    })
}

fn fib_rayon(n: i64) -> i64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

// ---- recursive_count: each level spawned -----------------------------------------------------
fn count(n: i64) -> BoxFut<i64> {
    Box::pin(async move {
        if n == 0 {
            return 0;
        }
        1 + tokio::spawn(count(n - 1)).await.unwrap()
    })
}

// ---- yield_storm ---------------------------------------------------------------------------
async fn yield_storm(tasks: i64, yields: i64) -> i64 {
    let hs: Vec<_> = (0..tasks)
        .map(|_| {
            tokio::spawn(async move {
                let mut done = 0;
                for _ in 0..yields {
                    tokio::task::yield_now().await;
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut sum = 0;
    for h in hs {
        sum += h.await.unwrap();
    }
    sum
}

// ---- ping_pong -----------------------------------------------------------------------------
async fn ping_pong(rounds: i64) -> i64 {
    let (to_pong, mut pong_rx) = tokio::sync::mpsc::channel::<i64>(1);
    let (to_ping, mut ping_rx) = tokio::sync::mpsc::channel::<i64>(1);
    let pong = tokio::spawn(async move {
        for _ in 0..rounds {
            let v = pong_rx.recv().await.unwrap();
            to_ping.send(v + 1).await.unwrap();
        }
    });
    let ping = tokio::spawn(async move {
        let mut ball = 0;
        for _ in 0..rounds {
            to_pong.send(ball).await.unwrap();
            ball = ping_rx.recv().await.unwrap();
        }
        ball
    });
    let ball = ping.await.unwrap();
    pong.await.unwrap();
    ball
}

// ---- jobs_100 (seed 004) ---------------------------------------------------------------------
fn job_delay(i: i64) -> Duration {
    Duration::from_millis((10 + (i * 37) % 41) as u64)
}

async fn jobs_fan_in(n: i64) -> i64 {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<i64>();
    for i in 0..n {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(job_delay(i)).await; // simulated I/O
            tx.send(i).unwrap();
        });
    }
    drop(tx);
    let mut sum = 0;
    while let Some(id) = rx.recv().await {
        sum += id;
    }
    sum
}

async fn jobs_limited(n: i64, limit: usize) -> i64 {
    let sem = Arc::new(tokio::sync::Semaphore::new(limit));
    let mut hs = Vec::new();
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await.unwrap();
        hs.push(tokio::spawn(async move {
            tokio::time::sleep(job_delay(i)).await;
            drop(permit);
            i
        }));
    }
    let mut sum = 0;
    for h in hs {
        sum += h.await.unwrap();
    }
    sum
}

// ---- for_async_1m ------------------------------------------------------------------------------
#[inline(never)]
fn body(i: i64) {
    std::hint::black_box(i);
}

async fn parallel_chunks(n: i64) -> i64 {
    let chunks = 4 * std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1) as i64;
    let hs: Vec<_> = (0..chunks)
        .map(|c| {
            let (lo, hi) = (n * c / chunks, n * (c + 1) / chunks);
            tokio::spawn(async move {
                for i in lo..hi {
                    body(i);
                }
                hi - lo
            })
        })
        .collect();
    let mut ran = 0;
    for h in hs {
        ran += h.await.unwrap();
    }
    ran
}

async fn task_per_body(n: i64) -> i64 {
    let hs: Vec<_> = (0..n).map(|i| tokio::spawn(async move { body(i); 1i64 })).collect();
    let mut ran = 0;
    for h in hs {
        ran += h.await.unwrap();
    }
    ran
}

// ---- channels ------------------------------------------------------------------------------
async fn spsc_bounded(n: i64) -> i64 {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<i64>(1024);
    tokio::spawn(async move {
        for i in 0..n {
            tx.send(i).await.unwrap();
        }
    });
    let consumer = tokio::spawn(async move {
        let mut sum = 0;
        while let Some(v) = rx.recv().await {
            sum += v;
        }
        sum
    });
    consumer.await.unwrap()
}

async fn spsc_unbounded(n: i64) -> i64 {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<i64>();
    tokio::spawn(async move {
        for i in 0..n {
            tx.send(i).unwrap();
        }
    });
    let consumer = tokio::spawn(async move {
        let mut sum = 0;
        while let Some(v) = rx.recv().await {
            sum += v;
        }
        sum
    });
    consumer.await.unwrap()
}

async fn mpmc(n: i64, capacity: Option<usize>) -> i64 {
    let (tx, rx) = match capacity {
        Some(c) => async_channel::bounded::<i64>(c),
        None => async_channel::unbounded::<i64>(),
    };
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = tx.clone();
            tokio::spawn(async move {
                for i in n * p / 2..n * (p + 1) / 2 {
                    tx.send(i).await.unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            tokio::spawn(async move {
                let mut sum = 0;
                while let Ok(v) = rx.recv().await {
                    sum += v;
                }
                sum
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    let mut total = 0;
    for c in consumers {
        total += c.await.unwrap();
    }
    total
}

// ---- thread injection (seed 000): blocking work goes to spawn_blocking ------------------------
fn cores() -> i64 {
    std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1) as i64
}

async fn sync_over_async(rec: Recorder) -> i64 {
    let (tx, rx) = tokio::sync::watch::channel(false); // the "unfinished task"
    let mut hs = Vec::new();
    for _ in 0..4 * cores() {
        let (rec, mut rx) = (rec.clone(), rx.clone());
        hs.push(tokio::task::spawn_blocking(move || {
            rec.start();
            tokio::runtime::Handle::current().block_on(rx.wait_for(|v| *v)).unwrap();
        }));
    }
    let r = rec.clone();
    hs.push(tokio::task::spawn_blocking(move || {
        r.start();
        tx.send(true).unwrap();
    }));
    let n = hs.len() as i64;
    for h in hs {
        h.await.unwrap();
    }
    n
}

async fn barrier(rec: Recorder) -> i64 {
    let n = 2 * cores() + 1;
    let b = Arc::new(std::sync::Barrier::new(n as usize + 1));
    let mut hs = Vec::new();
    for _ in 0..n {
        let (rec, b) = (rec.clone(), b.clone());
        hs.push(tokio::task::spawn_blocking(move || {
            rec.start();
            b.wait();
        }));
    }
    let b2 = b.clone();
    tokio::task::spawn_blocking(move || b2.wait()).await.unwrap();
    for h in hs {
        h.await.unwrap();
    }
    n
}

// ---- for_async_delay_100: seed 000's Parallel.ForAsync over 100 bodies of Task.Delay(1) ---------------
// `degree` spawned tasks take the next index from a shared counter until none is left (how .NET's
// ForAsync and tpl's for_async hand out indices); each body awaits a 1 ms tokio sleep.
async fn for_async_delay(n: i64, degree: i64) -> i64 {
    let next = Arc::new(AtomicI64::new(0));
    let ran = Arc::new(AtomicI64::new(0));
    let workers: Vec<_> = (0..degree)
        .map(|_| {
            let (next, ran) = (next.clone(), ran.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    ran.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    ran.load(Ordering::Relaxed)
}

// ---- rw_lock_stress: seed 000's ReaderWriterLockSlim program with std::sync::RwLock ----------------
// Rounds of 100 spawned tasks that each take and release a read lock (a short critical section:
// tokio's advice is the std lock), for 2 s (quick: 0.3 s; TPL_BENCH_RW_MS overrides, as for tpl).
// Checksum: acquisitions that took 10 ms or more.
async fn rw_lock_stress(quick: bool) -> i64 {
    let ms = std::env::var("TPL_BENCH_RW_MS").ok().and_then(|v| v.parse::<u64>().ok()).filter(|v| *v > 0);
    let duration = Duration::from_millis(ms.unwrap_or(if quick { 300 } else { 2000 }));
    let lock = Arc::new(std::sync::RwLock::new(()));
    let (acquisitions, slow, max_ns) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let round: Vec<_> = (0..100)
            .map(|_| {
                let (lock, acquisitions, slow, max_ns) = (lock.clone(), acquisitions.clone(), slow.clone(), max_ns.clone());
                tokio::spawn(async move {
                    let t0 = Instant::now();
                    drop(lock.read().unwrap());
                    let ns = t0.elapsed().as_nanos() as i64;
                    acquisitions.fetch_add(1, Ordering::Relaxed);
                    if ns >= 10_000_000 {
                        slow.fetch_add(1, Ordering::Relaxed);
                    }
                    max_ns.fetch_max(ns, Ordering::Relaxed);
                })
            })
            .collect();
        for t in round {
            t.await.unwrap();
        }
    }
    eprintln!(
        "  rw_lock_stress: {} acquisitions, longest {:.1} us, {} took >= 10 ms",
        acquisitions.load(Ordering::Relaxed),
        max_ns.load(Ordering::Relaxed) as f64 / 1000.0,
        slow.load(Ordering::Relaxed)
    );
    slow.load(Ordering::Relaxed)
}

// ---- async_generator: an async stream of n ints, summed by the consumer ---------------------------------
// The generator's body yields without waiting, as tpl's and C#'s: the per-item cost of the stream.
fn ints_stream(n: i64) -> impl futures::Stream<Item = i64> {
    async_stream::stream! {
        for i in 0..n {
            yield i;
        }
    }
}

async fn sum_async_stream(n: i64) -> i64 {
    let s = ints_stream(n);
    futures::pin_mut!(s);
    let mut sum = 0;
    while let Some(v) = s.next().await {
        sum += v;
    }
    sum
}

async fn sum_unfold(n: i64) -> i64 {
    let s = futures::stream::unfold(0i64, move |i| async move { if i < n { Some((i, i + 1)) } else { None } });
    futures::pin_mut!(s);
    let mut sum = 0;
    while let Some(v) = s.next().await {
        sum += v;
    }
    sum
}

// ---- the method table --------------------------------------------------------------------------
enum Run {
    Tokio(fn(bool, Recorder) -> BoxFut<i64>), // block_on on the multi-thread runtime
    Rayon(fn(bool) -> i64),                    // called on main, forks into rayon's global pool
}
struct Method {
    group: &'static str,
    name: &'static str,
    run: Run,
    no_warmup: bool,
}

const fn m(group: &'static str, name: &'static str, run: fn(bool, Recorder) -> BoxFut<i64>) -> Method {
    Method { group, name, run: Run::Tokio(run), no_warmup: false }
}

const fn r(group: &'static str, name: &'static str, run: fn(bool) -> i64) -> Method {
    Method { group, name, run: Run::Rayon(run), no_warmup: false }
}

fn methods() -> Vec<Method> {
    vec![
        m("chain", "spawn per link, await previous JoinHandle", |q, _| Box::pin(chain(pick(q, 1_000_000, 100_000)))),
        m("chain_channels", "task + mpsc(1) per link", |q, _| Box::pin(chain_mpsc(pick(q, 1_000_000, 100_000)))),
        m("chain_channels", "task + oneshot per link", |q, _| Box::pin(chain_oneshot(pick(q, 1_000_000, 100_000)))),
        m("skynet", "spawn + JoinHandle", |q, _| skynet(0, pick(q, 1_000_000, 100_000))),
        m("fib30", "spawn + JoinHandle, one child inline", |q, _| fib(pick(q, 30, 25))),
        m("fib35", "spawn + JoinHandle, one child inline", |q, _| fib(pick(q, 35, 30))),
        m("recursive_count", "spawn per level", |q, _| count(pick(q, 1_000_000, 100_000))),
        m("yield_storm", "spawn + yield_now()", |q, _| Box::pin(yield_storm(pick(q, 1000, 100), 1000))),
        m("ping_pong", "2 tasks, 2 mpsc(1)", |q, _| Box::pin(ping_pong(pick(q, 100_000, 10_000)))),
        m("jobs_100", "task per job, mpsc fan-in", |q, _| Box::pin(jobs_fan_in(pick(q, 100, 20)))),
        m("jobs_100", "Semaphore(4)", |q, _| Box::pin(jobs_limited(pick(q, 100, 20), 4))),
        m("jobs_100", "Semaphore(40)", |q, _| Box::pin(jobs_limited(pick(q, 100, 20), 40))),
        m("for_async_1m", "4 x cores chunk tasks", |q, _| Box::pin(parallel_chunks(pick(q, 1_000_000, 100_000)))),
        m("for_async_1m", "task per body", |q, _| Box::pin(task_per_body(pick(q, 1_000_000, 100_000)))),
        m("channel_spsc_bounded", "tokio mpsc(1024)", |q, _| Box::pin(spsc_bounded(pick(q, 10_000_000, 1_000_000)))),
        m("channel_spsc_unbounded", "tokio mpsc unbounded", |q, _| Box::pin(spsc_unbounded(pick(q, 10_000_000, 1_000_000)))),
        m("channel_mpmc_bounded", "async-channel bounded(1024)", |q, _| Box::pin(mpmc(pick(q, 10_000_000, 1_000_000), Some(1024)))),
        m("channel_mpmc_unbounded", "async-channel unbounded", |q, _| Box::pin(mpmc(pick(q, 10_000_000, 1_000_000), None))),
        Method { group: "sync_over_async", name: "spawn_blocking items block on a watch", run: Run::Tokio(|_, r| Box::pin(sync_over_async(r))), no_warmup: true },
        Method { group: "barrier", name: "spawn_blocking + std Barrier", run: Run::Tokio(|_, r| Box::pin(barrier(r))), no_warmup: true },
        m("for_async_delay_100", "cores tasks take indices, sleep(1 ms)", |_, _| Box::pin(for_async_delay(100, cores()))),
        m("for_async_delay_100", "100 tasks take indices, sleep(1 ms)", |_, _| Box::pin(for_async_delay(100, 100))),
        m("rw_lock_stress", "std RwLock, 100 spawned tasks a round", |q, _| Box::pin(rw_lock_stress(q))),
        m("async_generator", "async-stream stream! + StreamExt::next", |q, _| Box::pin(sum_async_stream(pick(q, 1_000_000, 100_000)))),
        m("async_generator", "futures::stream::unfold + StreamExt::next", |q, _| Box::pin(sum_unfold(pick(q, 1_000_000, 100_000)))),
        r("skynet", "rayon::scope, a spawn per child", |q| skynet_rayon(0, pick(q, 1_000_000, 100_000))),
        r("fib30", "rayon::join", |q| fib_rayon(pick(q, 30, 25))),
        r("fib35", "rayon::join", |q| fib_rayon(pick(q, 35, 30))),
        m("files_seq_read", "tokio::fs::File read 64 KiB", |q, _| Box::pin(files::seq_read(q))),
        m("files_rand_read", "tokio::fs::File seek + read_exact 4 KiB", |q, _| Box::pin(files::rand_read(q, 1))),
        m("files_rand_read_16", "16 tasks, a tokio::fs::File each, seek + read_exact 4 KiB", |q, _| Box::pin(files::rand_read(q, 16))),
        m("files_seq_write", "tokio::fs::File write_all 64 KiB", |q, _| Box::pin(files::seq_write(q))),
        m("files_rand_write", "tokio::fs::File seek + write_all 4 KiB", |q, _| Box::pin(files::rand_write(q))),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rayon = args.iter().any(|a| a == "--rayon");
    let all: Vec<Method> = methods().into_iter().filter(|m| matches!(m.run, Run::Rayon(_)) == rayon).collect();
    if args.iter().any(|a| a == "--list") {
        for m in &all {
            println!("{}\t{}", m.group, m.name);
        }
        if !rayon {
            // The servers run on tokio: listed once, under the tokio runtime.
            for s in servers::servers() {
                println!("{}\t{}", s.kind, s.name);
            }
        }
        return;
    }
    if let Some(p) = args.iter().position(|a| a == "--serve") {
        if args.len() > p + 2 {
            servers::serve(&args[p + 1], &args[p + 2]);
        }
    }
    let pos = args.iter().position(|a| a == "--run");
    let (group, name) = match pos {
        Some(p) if args.len() > p + 2 => (args[p + 1].clone(), args[p + 2].clone()),
        _ => {
            eprintln!("usage: peer [--rayon] --list | [--rayon] --run <group> <method> [--quick]");
            std::process::exit(2);
        }
    };
    let Some(m) = all.iter().find(|m| m.group == group && m.name == name) else {
        eprintln!("no method {group:?} / {name:?}");
        std::process::exit(2);
    };
    let run: Box<dyn Fn(bool, Recorder) -> i64> = match m.run {
        Run::Tokio(f) => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
            Box::new(move |q, rec| rt.block_on(f(q, rec)))
        }
        Run::Rayon(f) => {
            rayon::ThreadPoolBuilder::new().num_threads(cores() as usize).build_global().unwrap();
            Box::new(move |q, _| f(q))
        }
    };
    if !m.no_warmup {
        run(true, Recorder::new());
    }
    let rec = Recorder::new();
    let a0 = ALLOCATED.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let sum = run(quick, rec.clone());
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let alloc = ALLOCATED.load(Ordering::Relaxed) - a0;
    let starts = rec.0 .1.lock().unwrap().clone();
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut line = format!(
        "{{\"group\": \"{}\", \"method\": \"{}\", \"ms\": {:.6}, \"checksum\": {}, \"allocated_bytes\": {}",
        esc(m.group), esc(m.name), ms, sum, alloc
    );
    if !starts.is_empty() {
        let list: Vec<String> = starts.iter().map(|v| format!("{v:.6}")).collect();
        line += &format!(", \"starts_ms\": [{}]", list.join(", "));
    }
    line += "}";
    println!("{line}");
    // Leave without dropping the runtime (it would wait for the blocking pool's idle threads).
    std::process::exit(0);
}
