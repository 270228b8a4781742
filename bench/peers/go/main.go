// Go peer of tpl's benchmark workloads (see bench/peers/README.md for the protocol):
//
//	peer --list                              one "<group>\t<method>" line per method
//	peer --run <group> <method> [--quick]    warm-up at the quick size, one measured run,
//	                                         one JSON line on stdout
//	peer --serve <kind> <method>             a server of a server group (servers.go)
//
// Written as a Go programmer would: goroutines, channels, sync.WaitGroup.
package main

import (
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type method struct {
	group, name string
	run         func(quick bool, rec *recorder) int64
	noWarmup    bool // thread-injection programs: a fresh process is the point
}

// recorder notes when each work item started (thread-injection timelines).
type recorder struct {
	mu     sync.Mutex
	t0     time.Time
	starts []float64
}

func (r *recorder) start() {
	if r == nil {
		return
	}
	d := float64(time.Since(r.t0).Nanoseconds()) / 1e6
	r.mu.Lock()
	r.starts = append(r.starts, d)
	r.mu.Unlock()
}

func pick(quick bool, full, small int) int {
	if quick {
		return small
	}
	return full
}

// ---- chain_channels: seed 001's program -------------------------------------------------
func chainLink(output, input chan int) { output <- 1 + <-input }

func chainChannels(n int) int64 {
	finalOutput := make(chan int)
	var left, right chan int = nil, finalOutput
	for i := 0; i < n; i++ {
		left, right = right, make(chan int)
		go chainLink(left, right)
	}
	right <- 0
	return int64(<-finalOutput)
}

// ---- skynet -----------------------------------------------------------------------------
func skynet(c chan int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64, 10)
	var sum int64
	sub := size / 10
	for i := int64(0); i < 10; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

// ---- fib: binary fork-join, every call with n >= 2 forks one child and runs the other ----
func fib(n int) int64 {
	if n < 2 {
		return int64(n)
	}
	var left int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		left = fib(n - 1)
	}()
	right := fib(n - 2)
	wg.Wait()
	return left + right
}

// ---- recursive_count: each level in its own goroutine ---------------------------------------
func count(n int, out chan int) {
	if n == 0 {
		out <- 0
		return
	}
	c := make(chan int, 1)
	go count(n-1, c)
	out <- 1 + <-c
}

// ---- yield_storm ------------------------------------------------------------------------
func yieldStorm(tasks, yields int) int64 {
	var wg sync.WaitGroup
	var total atomic.Int64
	for t := 0; t < tasks; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var done int64
			for i := 0; i < yields; i++ {
				runtime.Gosched()
				done++
			}
			total.Add(done)
		}()
	}
	wg.Wait()
	return total.Load()
}

// ---- ping_pong --------------------------------------------------------------------------
func pingPong(rounds int) int64 {
	toPong, toPing := make(chan int), make(chan int)
	go func() {
		for i := 0; i < rounds; i++ {
			toPing <- 1 + <-toPong
		}
	}()
	ball := 0
	for i := 0; i < rounds; i++ {
		toPong <- ball
		ball = <-toPing
	}
	return int64(ball)
}

// ---- jobs_100: seed 004 -------------------------------------------------------------------
func jobDelay(i int) time.Duration { return time.Duration(10+(i*37)%41) * time.Millisecond }

func jobsFanIn(n int) int64 {
	ch := make(chan int)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			time.Sleep(jobDelay(id)) // simulated I/O
			ch <- id
		}(i)
	}
	go func() { wg.Wait(); close(ch) }()
	var sum int64
	for id := range ch {
		sum += int64(id)
	}
	return sum
}

func jobsWorkers(n, workers int) int64 {
	jobs := make(chan int)
	var sum atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range jobs {
				time.Sleep(jobDelay(id))
				sum.Add(int64(id))
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return sum.Load()
}

// ---- for_async_1m: a parallel loop over no-op bodies ---------------------------------------
var body = func(i int) {}

func parallelFor(n int) int64 {
	chunks := runtime.GOMAXPROCS(0) * 4
	var wg sync.WaitGroup
	var ran atomic.Int64
	for c := 0; c < chunks; c++ {
		lo, hi := n*c/chunks, n*(c+1)/chunks
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				body(i)
			}
			ran.Add(int64(hi - lo))
		}()
	}
	wg.Wait()
	return ran.Load()
}

func goroutinePerBody(n int) int64 {
	var wg sync.WaitGroup
	var ran atomic.Int64
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			body(i)
			ran.Add(1)
			wg.Done()
		}(i)
	}
	wg.Wait()
	return ran.Load()
}

// ---- channels: n items, producers x consumers -------------------------------------------
func channelRun(n, producers, consumers, capacity int) int64 {
	ch := make(chan int64, capacity)
	var pw, cw sync.WaitGroup
	for p := 0; p < producers; p++ {
		lo, hi := n*p/producers, n*(p+1)/producers
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := lo; i < hi; i++ {
				ch <- int64(i)
			}
		}()
	}
	var total atomic.Int64
	for c := 0; c < consumers; c++ {
		cw.Add(1)
		go func() {
			defer cw.Done()
			var sum int64
			for v := range ch {
				sum += v
			}
			total.Add(sum)
		}()
	}
	pw.Wait()
	close(ch)
	cw.Wait()
	return total.Load()
}

// ---- thread injection (seed 000) ----------------------------------------------------------
func syncOverAsync(rec *recorder) int64 {
	done := make(chan struct{}) // the "unfinished task"
	var wg sync.WaitGroup
	var ran atomic.Int64
	items := 4 * runtime.NumCPU()
	for i := 0; i < items; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec.start()
			<-done // blocks this goroutine (not an OS thread)
			ran.Add(1)
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); rec.start(); close(done); ran.Add(1) }()
	wg.Wait()
	return ran.Load()
}

func barrier(rec *recorder) int64 {
	participants := 2*runtime.NumCPU() + 1
	var arrived, wg sync.WaitGroup // arrived: the barrier (all participants + main)
	arrived.Add(participants + 1)
	var ran atomic.Int64
	for i := 0; i < participants; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec.start()
			arrived.Done()
			arrived.Wait()
			ran.Add(1)
		}()
	}
	arrived.Done()
	arrived.Wait()
	wg.Wait()
	return ran.Load()
}

// ---- for_async_delay_100: seed 000's Parallel.ForAsync over 100 bodies of Task.Delay(1) ----------
// Go has no parallel loop: `degree` goroutines take the next index from a shared counter until
// none is left (how .NET's ForAsync and tpl's for_async hand out indices), and each body sleeps
// 1 ms (a goroutine blocked in time.Sleep holds no thread).
func forAsyncDelay(n, degree int) int64 {
	var next, ran atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < degree; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)-1) < n {
				time.Sleep(time.Millisecond)
				ran.Add(1)
			}
		}()
	}
	wg.Wait()
	return ran.Load()
}

// ---- multiple_serial: seed 000's MultipleSerial -------------------------------------------------
// sync.Pool stands in for ArrayPool<byte>.Shared (per-P caches), runtime.Gosched() for Task.Yield.
var bufferPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

//go:noinline
func iterateAll(a []byte) byte {
	var ret byte
	for _, v := range a {
		ret = v
	}
	return ret
}

func multipleSerial(iterations int) int64 {
	var nested [8]*[]byte
	var checksum int64
	for i := 0; i < iterations; i++ {
		for j := range nested {
			nested[j] = bufferPool.Get().(*[]byte)
			clear(*nested[j])
		}
		runtime.Gosched()
		for j := len(nested) - 1; j >= 0; j-- {
			checksum += int64(iterateAll(*nested[j]))
			bufferPool.Put(nested[j])
		}
		checksum++
	}
	return checksum
}

// ---- rw_lock_stress: seed 000's ReaderWriterLockSlim program with sync.RWMutex ----------------------
// Rounds of 100 goroutines that each take and release a read lock, for 2 s (quick: 0.3 s;
// TPL_BENCH_RW_MS overrides, as for tpl). Checksum: acquisitions that took 10 ms or more.
func rwDuration(quick bool) time.Duration {
	if v, err := strconv.Atoi(os.Getenv("TPL_BENCH_RW_MS")); err == nil && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	if quick {
		return 300 * time.Millisecond
	}
	return 2 * time.Second
}

func rwLockStress(quick bool) int64 {
	var rwl sync.RWMutex
	var acquisitions, slow, maxNs atomic.Int64
	end := time.Now().Add(rwDuration(quick))
	for time.Now().Before(end) {
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				rwl.RLock()
				rwl.RUnlock()
				ns := time.Since(t0).Nanoseconds()
				acquisitions.Add(1)
				if ns >= 10_000_000 {
					slow.Add(1)
				}
				for seen := maxNs.Load(); ns > seen && !maxNs.CompareAndSwap(seen, ns); seen = maxNs.Load() {
				}
			}()
		}
		wg.Wait()
	}
	fmt.Fprintf(os.Stderr, "  rw_lock_stress: %d acquisitions, longest %.1f us, %d took >= 10 ms\n",
		acquisitions.Load(), float64(maxNs.Load())/1000, slow.Load())
	return slow.Load()
}

// ---- async_generator: Go's generator idiom, a goroutine ranging into a channel -----------------
func intsChan(n, capacity int) <-chan int {
	ch := make(chan int, capacity)
	go func() {
		for i := 0; i < n; i++ {
			ch <- i
		}
		close(ch)
	}()
	return ch
}

func sumChan(n, capacity int) int64 {
	var sum int64
	for v := range intsChan(n, capacity) {
		sum += int64(v)
	}
	return sum
}

// Go 1.23's range-over-func iterator: synchronous (the body runs inside the loop's call), the
// floor of a pull-based stream with no waiting in the body.
func intsSeq(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := 0; i < n; i++ {
			if !yield(i) {
				return
			}
		}
	}
}

func sumSeq(n int) int64 {
	var sum int64
	for v := range intsSeq(n) {
		sum += int64(v)
	}
	return sum
}

var methods = []method{
	{group: "chain_channels", name: "goroutine + unbuffered chan per link", run: func(q bool, _ *recorder) int64 { return chainChannels(pick(q, 1000000, 100000)) }},
	{group: "skynet", name: "goroutines + chan", run: func(q bool, _ *recorder) int64 {
		c := make(chan int64)
		go skynet(c, 0, int64(pick(q, 1000000, 100000)))
		return <-c
	}},
	{group: "fib30", name: "goroutine + WaitGroup, one child inline", run: func(q bool, _ *recorder) int64 { return fib(pick(q, 30, 25)) }},
	{group: "fib35", name: "goroutine + WaitGroup, one child inline", run: func(q bool, _ *recorder) int64 { return fib(pick(q, 35, 30)) }},
	{group: "recursive_count", name: "goroutine per level + chan", run: func(q bool, _ *recorder) int64 {
		c := make(chan int, 1)
		go count(pick(q, 1000000, 100000), c)
		return int64(<-c)
	}},
	{group: "yield_storm", name: "goroutines + runtime.Gosched()", run: func(q bool, _ *recorder) int64 { return yieldStorm(pick(q, 1000, 100), 1000) }},
	{group: "ping_pong", name: "2 goroutines, 2 unbuffered chans", run: func(q bool, _ *recorder) int64 { return pingPong(pick(q, 100000, 10000)) }},
	{group: "jobs_100", name: "goroutine per job, chan fan-in", run: func(q bool, _ *recorder) int64 { return jobsFanIn(pick(q, 100, 20)) }},
	{group: "jobs_100", name: "4 worker goroutines", run: func(q bool, _ *recorder) int64 { return jobsWorkers(pick(q, 100, 20), 4) }},
	{group: "jobs_100", name: "40 worker goroutines", run: func(q bool, _ *recorder) int64 { return jobsWorkers(pick(q, 100, 20), 40) }},
	{group: "for_async_1m", name: "4 x GOMAXPROCS chunk goroutines", run: func(q bool, _ *recorder) int64 { return parallelFor(pick(q, 1000000, 100000)) }},
	{group: "for_async_1m", name: "goroutine per body", run: func(q bool, _ *recorder) int64 { return goroutinePerBody(pick(q, 1000000, 100000)) }},
	{group: "channel_spsc_bounded", name: "chan cap 1024", run: func(q bool, _ *recorder) int64 { return channelRun(pick(q, 10000000, 1000000), 1, 1, 1024) }},
	{group: "channel_mpmc_bounded", name: "chan cap 1024, 2x2 goroutines", run: func(q bool, _ *recorder) int64 { return channelRun(pick(q, 10000000, 1000000), 2, 2, 1024) }},
	{group: "sync_over_async", name: "goroutines block on a chan", noWarmup: true, run: func(_ bool, r *recorder) int64 { return syncOverAsync(r) }},
	{group: "barrier", name: "goroutines + WaitGroup barrier", noWarmup: true, run: func(_ bool, r *recorder) int64 { return barrier(r) }},
	{group: "for_async_delay_100", name: "GOMAXPROCS goroutines take indices, time.Sleep(1 ms)", run: func(_ bool, _ *recorder) int64 { return forAsyncDelay(100, runtime.GOMAXPROCS(0)) }},
	{group: "for_async_delay_100", name: "100 goroutines take indices, time.Sleep(1 ms)", run: func(_ bool, _ *recorder) int64 { return forAsyncDelay(100, 100) }},
	{group: "multiple_serial", name: "8 x sync.Pool Get + clear 4 KiB, Gosched, 8 x Put", run: func(q bool, _ *recorder) int64 { return multipleSerial(pick(q, 100000, 10000)) }},
	{group: "rw_lock_stress", name: "sync.RWMutex, 100 goroutines a round", run: func(q bool, _ *recorder) int64 { return rwLockStress(q) }},
	{group: "async_generator", name: "goroutine + unbuffered chan, for range", run: func(q bool, _ *recorder) int64 { return sumChan(pick(q, 1000000, 100000), 0) }},
	{group: "async_generator", name: "goroutine + chan cap 1024, for range", run: func(q bool, _ *recorder) int64 { return sumChan(pick(q, 1000000, 100000), 1024) }},
	{group: "async_generator", name: "iter.Seq range-over-func (synchronous)", run: func(q bool, _ *recorder) int64 { return sumSeq(pick(q, 1000000, 100000)) }},
	{group: "files_seq_read", name: "os.File.Read 64 KiB", run: func(q bool, _ *recorder) int64 { return filesSeqRead(q) }},
	{group: "files_rand_read", name: "os.File.ReadAt 4 KiB", run: func(q bool, _ *recorder) int64 { return filesRandRead(q, 1) }},
	{group: "files_rand_read_16", name: "16 goroutines of os.File.ReadAt 4 KiB", run: func(q bool, _ *recorder) int64 { return filesRandRead(q, 16) }},
	{group: "files_seq_write", name: "os.File.Write 64 KiB", run: func(q bool, _ *recorder) int64 { return filesSeqWrite(q) }},
	{group: "files_rand_write", name: "os.File.WriteAt 4 KiB", run: func(q bool, _ *recorder) int64 { return filesRandWrite(q) }},
}

func main() {
	args := os.Args[1:]
	quick := false
	var group, name string
	list, serving := false, false
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--quick":
			quick = true
		case "--list":
			list = true
		case "--run", "--serve":
			if i+2 < len(args) {
				serving = args[i] == "--serve"
				group, name = args[i+1], args[i+2]
				i += 2
			}
		}
	}
	if list {
		for _, m := range methods {
			fmt.Printf("%s\t%s\n", m.group, m.name)
		}
		for _, s := range servers {
			fmt.Printf("%s\t%s\n", s.kind, s.name)
		}
		return
	}
	if serving {
		serve(group, name)
		return
	}
	for _, m := range methods {
		if m.group != group || m.name != name {
			continue
		}
		if !m.noWarmup {
			m.run(true, nil)
		}
		runtime.GC()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		rec := &recorder{t0: time.Now()}
		t0 := time.Now()
		sum := m.run(quick, rec)
		elapsed := float64(time.Since(t0).Nanoseconds()) / 1e6
		runtime.ReadMemStats(&ms1)
		out := map[string]any{"group": m.group, "method": m.name, "ms": elapsed, "checksum": sum,
			"allocated_bytes": ms1.TotalAlloc - ms0.TotalAlloc}
		if len(rec.starts) > 0 {
			out["starts_ms"] = rec.starts
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
		return
	}
	fmt.Fprintf(os.Stderr, "no method %q / %q\n", group, name)
	os.Exit(2)
}
