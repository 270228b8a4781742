// The files groups (bench/workloads/files.cpp describes them): os.File on the file bench/run.py
// prepared (TPL_BENCH_FILE: 4 KiB blocks, block b filled with b mod 256, in the page cache);
// sequential writes to TPL_BENCH_WRITE_FILE.
package main

import (
	"fmt"
	"os"
	"sync"
)

const (
	fileBlock    = 4096
	fileSeqChunk = 64 << 10
)

func filesReadBytes(quick bool) int64 { return int64(pick(quick, 1<<30, 16<<20)) }

func filesEnvPath(name string) string {
	p := os.Getenv(name)
	if p == "" {
		fmt.Fprintf(os.Stderr, "%s is not set (bench/run.py prepares the file)\n", name)
		os.Exit(2)
	}
	return p
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// randomOffsets: the LCG every program of the files groups uses.
func randomOffsets(count int, region int64) []int64 {
	x := uint64(42)
	blocks := uint64(region / fileBlock)
	offsets := make([]int64, count)
	for i := range offsets {
		x = x*6364136223846793005 + 1442695040888963407
		offsets[i] = int64((x>>33)%blocks) * fileBlock
	}
	return offsets
}

// fillBlocks fills each block with its value by doubling copies (copy is a memmove), so that
// filling costs next to nothing beside the writes, as in every program of the group.
func fillBlocks(buf []byte, firstBlock int64) {
	for b := 0; b < len(buf)/fileBlock; b++ {
		s := buf[b*fileBlock : (b+1)*fileBlock]
		s[0] = byte(firstBlock + int64(b))
		for j := 1; j < len(s); j *= 2 {
			copy(s[j:], s[:j])
		}
	}
}

func filesSeqRead(quick bool) int64 {
	f, err := os.Open(filesEnvPath("TPL_BENCH_FILE"))
	check(err)
	defer f.Close()
	buf := make([]byte, fileSeqChunk)
	limit, total := filesReadBytes(quick), int64(0)
	for total < limit {
		n, err := f.Read(buf[:min(int64(len(buf)), limit-total)])
		if n == 0 || err != nil {
			break
		}
		total += int64(n)
	}
	return total
}

func filesRandRead(quick bool, readers int) int64 {
	f, err := os.Open(filesEnvPath("TPL_BENCH_FILE"))
	check(err)
	defer f.Close()
	offsets := randomOffsets(pick(quick, 100000, 5000), filesReadBytes(quick))
	sums := make([]int64, readers)
	var wg sync.WaitGroup
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			buf := make([]byte, fileBlock)
			for _, off := range offsets[len(offsets)*r/readers : len(offsets)*(r+1)/readers] {
				_, err := f.ReadAt(buf, off)
				check(err)
				sums[r] += int64(buf[0])
			}
		}(r)
	}
	wg.Wait()
	var sum int64
	for _, s := range sums {
		sum += s
	}
	return sum
}

func filesSeqWrite(quick bool) int64 {
	f, err := os.Create(filesEnvPath("TPL_BENCH_WRITE_FILE"))
	check(err)
	defer f.Close()
	chunk := make([]byte, fileSeqChunk)
	size, total := int64(pick(quick, 64<<20, 16<<20)), int64(0)
	for ; total < size; total += fileSeqChunk {
		fillBlocks(chunk, total/fileBlock)
		_, err := f.Write(chunk)
		check(err)
	}
	return total
}

// filesRandWrite rewrites blocks of the read file in place, each with the bytes it holds.
func filesRandWrite(quick bool) int64 {
	f, err := os.OpenFile(filesEnvPath("TPL_BENCH_FILE"), os.O_WRONLY, 0)
	check(err)
	defer f.Close()
	block := make([]byte, fileBlock)
	var total int64
	for _, off := range randomOffsets(pick(quick, 25000, 1000), filesReadBytes(quick)) {
		fillBlocks(block, off/fileBlock)
		n, err := f.WriteAt(block, off)
		check(err)
		total += int64(n)
	}
	return total
}
