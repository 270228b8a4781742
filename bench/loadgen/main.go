// loadgen: the one load client of bench/run.py's echo and sync_over_async_server groups. The
// same client drives every runtime's server, so what differs between rows is the server.
//
//	loadgen echo -addr 127.0.0.1:PORT -conns C (-requests N | -duration D) [-size 64]
//	             [-warmup W] [-blocking B] [-grace G] [-seconds-max S]
//
// Each of the C connections does N/C round trips one after another (or as many as it can in D
// seconds; a round trip in flight at the end gets G more seconds, and one still unanswered then
// is counted with the time it waited, as "unanswered"): it writes a message of -size bytes and reads the echo
// back in full (checking every byte). Before the clock starts, every connection is open and has
// done W round trips. With -blocking B, B more connections send messages whose first byte is 'B'
// (the server's handler blocks on them, see the sync_over_async_server group) for as long as the
// C measured connections run; their round trips are counted apart. Prints ONE JSON line:
//
//	{"ms", "requests", "requests_per_s", "p50_us", "p99_us", "checksum", "blocking_requests",
//	 "unanswered"}
//
// checksum = the verified round trips of the measured connections (C x N/C with -requests). Everything is
// bounded: the dial and every round trip time out (-seconds-max), and so does the whole run.
// The C + B connections are descriptors: the Go runtime raises the RLIMIT_NOFILE soft limit to
// the hard limit at start-up, and bench/run.py does the same for everything it starts.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type conn struct {
	c       net.Conn
	out, in []byte
	id      int
	seq     int
}

func dial(addr string, id, size int, deadline time.Time) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	return &conn{c: c, out: make([]byte, size), in: make([]byte, size), id: id}, nil
}

// roundTrip sends one message (first byte kind) and reads back its echo, byte for byte.
func (k *conn) roundTrip(kind byte) error {
	k.seq++
	for j := range k.out {
		k.out[j] = byte(k.id*31 + k.seq*7 + j)
	}
	k.out[0] = kind
	if _, err := k.c.Write(k.out); err != nil {
		return err
	}
	if _, err := io.ReadFull(k.c, k.in); err != nil {
		return err
	}
	for j := range k.in {
		if k.in[j] != k.out[j] {
			return fmt.Errorf("connection %d, message %d: byte %d is %d, sent %d", k.id, k.seq, j, k.in[j], k.out[j])
		}
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func percentileUs(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i]) / 1e3
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", a...)
	os.Exit(1)
}

func echo(args []string) {
	fs := flag.NewFlagSet("echo", flag.ExitOnError)
	addr := fs.String("addr", "", "server address host:port (loopback)")
	conns := fs.Int("conns", 1, "measured connections")
	requests := fs.Int("requests", 10000, "round trips in all, split over the measured connections")
	duration := fs.Float64("duration", 0, "seconds to run instead of a number of round trips")
	grace := fs.Float64("grace", 1, "with -duration: seconds a round trip in flight at the end may still take")
	size := fs.Int("size", 64, "message size in bytes")
	warmup := fs.Int("warmup", 100, "round trips per connection before the clock starts")
	blocking := fs.Int("blocking", 0, "connections whose requests block the server's handler")
	secondsMax := fs.Float64("seconds-max", 60, "give up after this long")
	_ = fs.Parse(args)
	if *addr == "" || *conns < 1 || (*duration <= 0 && *requests < *conns) || *size < 1 || *warmup < 0 || *blocking < 0 {
		fail("bad arguments")
	}
	deadline := time.Now().Add(time.Duration(*secondsMax * float64(time.Second)))
	timer := time.AfterFunc(time.Until(deadline)+time.Second, func() { fail("timed out") })
	defer timer.Stop()

	all := make([]*conn, *conns+*blocking)
	for i := range all {
		k, err := dial(*addr, i, *size, deadline)
		if err != nil {
			fail("connect %s: %v", *addr, err)
		}
		all[i] = k
	}
	measured, blockers := all[:*conns], all[*conns:]
	perConn := *requests / *conns
	var end time.Time // with -duration: no round trip starts after it

	var wg sync.WaitGroup
	errs := make(chan error, len(all))
	for _, k := range measured {
		wg.Add(1)
		go func(k *conn) {
			defer wg.Done()
			for i := 0; i < *warmup; i++ {
				if err := k.roundTrip('E'); err != nil {
					errs <- err
					return
				}
			}
		}(k)
	}
	wg.Wait()
	select {
	case err := <-errs:
		fail("warm-up: %v", err)
	default:
	}

	var stop atomic.Bool
	var blocked, unanswered atomic.Int64
	var blockWg sync.WaitGroup
	for _, k := range blockers {
		blockWg.Add(1)
		go func(k *conn) {
			defer blockWg.Done()
			for !stop.Load() {
				if err := k.roundTrip('B'); err != nil {
					if !stop.Load() || !isTimeout(err) {
						errs <- err
					}
					return
				}
				blocked.Add(1)
			}
		}(k)
	}
	if *blocking > 0 {
		time.Sleep(20 * time.Millisecond) // the blocking requests are in the server first
	}

	latencies := make([][]int64, len(measured))
	start := make(chan struct{})
	for i, k := range measured {
		latencies[i] = make([]int64, 0, perConn)
		wg.Add(1)
		go func(i int, k *conn) {
			defer wg.Done()
			<-start
			for r := 0; *duration > 0 || r < perConn; r++ {
				if *duration > 0 && !time.Now().Before(end) {
					break
				}
				t0 := time.Now()
				if err := k.roundTrip('E'); err != nil {
					if *duration > 0 && time.Now().After(end) && isTimeout(err) {
						unanswered.Add(1)
						latencies[i] = append(latencies[i], int64(time.Since(t0)))
					} else {
						errs <- err
					}
					return
				}
				latencies[i] = append(latencies[i], int64(time.Since(t0)))
			}
		}(i, k)
	}
	t0 := time.Now()
	end = t0.Add(time.Duration(*duration * float64(time.Second)))
	if *duration > 0 {
		// Bounds the round trips in flight at the end, the blocking connections' too.
		cut := end.Add(time.Duration(*grace * float64(time.Second)))
		endTimer := time.AfterFunc(time.Until(end), func() {
			stop.Store(true)
			for _, k := range all {
				_ = k.c.SetDeadline(cut)
			}
		})
		defer endTimer.Stop()
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	stop.Store(true)
	blockWg.Wait()
	select {
	case err := <-errs:
		fail("%v", err)
	default:
	}
	var merged []int64
	for _, l := range latencies {
		merged = append(merged, l...)
	}
	sort.Slice(merged, func(a, b int) bool { return merged[a] < merged[b] })
	for _, k := range all {
		k.c.Close()
	}
	n := len(merged) - int(unanswered.Load())
	out := map[string]any{
		"ms":                float64(elapsed.Nanoseconds()) / 1e6,
		"requests":          n,
		"requests_per_s":    float64(n) / elapsed.Seconds(),
		"p50_us":            percentileUs(merged, 0.50),
		"p99_us":            percentileUs(merged, 0.99),
		"unanswered":        unanswered.Load(),
		"checksum":          n,
		"blocking_requests": blocked.Load(),
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "echo" {
		fmt.Fprintln(os.Stderr, "usage: loadgen echo -addr HOST:PORT -conns C (-requests N | -duration D) [-size 64] [-warmup W] [-blocking B] [-seconds-max S]")
		os.Exit(2)
	}
	echo(os.Args[2:])
}
