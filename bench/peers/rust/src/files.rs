//! The files groups (bench/workloads/files.cpp describes them) on tokio::fs, which runs every
//! operation as a spawn_blocking call: the file bench/run.py prepared (TPL_BENCH_FILE: 4 KiB
//! blocks, block b filled with b mod 256, in the page cache); sequential writes to
//! TPL_BENCH_WRITE_FILE.
use std::io::SeekFrom;

use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::pick;

const BLOCK: u64 = 4096;
const SEQ_CHUNK: usize = 64 << 10;

fn read_bytes(quick: bool) -> u64 {
    pick(quick, 1 << 30, 16 << 20) as u64
}

fn env_path(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        eprintln!("{name} is not set (bench/run.py prepares the file)");
        std::process::exit(2);
    })
}

/// The LCG every program of the files groups uses.
fn random_offsets(count: i64, region: u64) -> Vec<u64> {
    let blocks = region / BLOCK;
    let mut x: u64 = 42;
    (0..count)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % blocks) * BLOCK
        })
        .collect()
}

/// One `fill` (a memset) per block, so that filling costs next to nothing beside the writes.
fn fill_blocks(buf: &mut [u8], first_block: u64) {
    for (b, block) in buf.chunks_mut(BLOCK as usize).enumerate() {
        block.fill((first_block + b as u64) as u8);
    }
}

pub async fn seq_read(quick: bool) -> i64 {
    let mut f = File::open(env_path("TPL_BENCH_FILE")).await.unwrap();
    let mut buf = vec![0u8; SEQ_CHUNK];
    let limit = read_bytes(quick);
    let mut total = 0u64;
    while total < limit {
        let want = (limit - total).min(SEQ_CHUNK as u64) as usize;
        let n = f.read(&mut buf[..want]).await.unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    total as i64
}

async fn read_blocks(offsets: Vec<u64>) -> i64 {
    let mut f = File::open(env_path("TPL_BENCH_FILE")).await.unwrap();
    let mut buf = vec![0u8; BLOCK as usize];
    let mut sum = 0i64;
    for off in offsets {
        f.seek(SeekFrom::Start(off)).await.unwrap();
        f.read_exact(&mut buf).await.unwrap();
        sum += buf[0] as i64;
    }
    sum
}

/// `readers` tasks, each with its own tokio::fs::File (one File serves one operation at a time).
pub async fn rand_read(quick: bool, readers: usize) -> i64 {
    let offsets = random_offsets(pick(quick, 100_000, 5_000), read_bytes(quick));
    let n = offsets.len();
    let tasks: Vec<_> = (0..readers)
        .map(|r| tokio::spawn(read_blocks(offsets[n * r / readers..n * (r + 1) / readers].to_vec())))
        .collect();
    let mut sum = 0;
    for t in tasks {
        sum += t.await.unwrap();
    }
    sum
}

pub async fn seq_write(quick: bool) -> i64 {
    let mut f = File::create(env_path("TPL_BENCH_WRITE_FILE")).await.unwrap();
    let mut chunk = vec![0u8; SEQ_CHUNK];
    let size = pick(quick, 64 << 20, 16 << 20) as u64;
    let mut total = 0u64;
    while total < size {
        fill_blocks(&mut chunk, total / BLOCK);
        f.write_all(&chunk).await.unwrap();
        total += SEQ_CHUNK as u64;
    }
    f.flush().await.unwrap(); // the last write has completed
    total as i64
}

/// Rewrites blocks of the read file in place, each with the bytes it holds.
pub async fn rand_write(quick: bool) -> i64 {
    let mut f = OpenOptions::new().write(true).open(env_path("TPL_BENCH_FILE")).await.unwrap();
    let mut block = vec![0u8; BLOCK as usize];
    let mut total = 0i64;
    for off in random_offsets(pick(quick, 25_000, 1_000), read_bytes(quick)) {
        fill_blocks(&mut block, off / BLOCK);
        f.seek(SeekFrom::Start(off)).await.unwrap();
        f.write_all(&block).await.unwrap();
        total += BLOCK as i64;
    }
    f.flush().await.unwrap();
    total
}
