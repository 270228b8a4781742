// C# peer of tpl's benchmark workloads (see bench/peers/README.md for the protocol):
//
//   peer --list                             one "<group>\t<method>" line per method
//   peer --run <group> <method> [--quick]   warm-up at the quick size, one measured run,
//                                           one JSON line on stdout
//   peer --serve <kind> <method>            a server of a server group (CoreCLR only): Socket
//                                           with async/await, a task per connection
//
// The files groups (CoreCLR only) use FileStream with FileOptions.Asynchronous, as a .NET Core 3.1
// program does: on Unix its asynchronous reads and writes run the system call on a pool thread.
//
// Compiled twice by Mono's mcs: for Mono (mscorlib) and, with -define:CORECLR, against the
// framework assemblies of .NET Core 3.1 (PyPI's dotnetcore2), run on CoreCLR. Written as a C#
// programmer would: async/await, Task.Run, TaskCompletionSource, Task.WhenAll, Parallel.For,
// System.Threading.Channels (CoreCLR only: Mono's class library has none). mcs knows C# 7 at most:
// the async iterator of async_generator is written out as the C# 8 compiler lowers it.
using System;
using System.Buffers;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;
#if CORECLR
using System.Net;
using System.Net.Sockets;
using System.Threading.Channels;
#endif

static class Peer
{
    delegate long Body(bool quick, Recorder rec);

    sealed class Method
    {
        public string Group, Name;
        public Body Run;
        public bool NoWarmup;
        public Method(string g, string n, Body b, bool noWarmup = false) { Group = g; Name = n; Run = b; NoWarmup = noWarmup; }
    }

    sealed class Recorder
    {
        readonly Stopwatch sw = Stopwatch.StartNew();
        public readonly List<double> Starts = new List<double>();
        public void Start() { double ms = sw.Elapsed.TotalMilliseconds; lock (Starts) Starts.Add(ms); }
    }

    static int Pick(bool quick, int full, int small) { return quick ? small : full; }

    // ---- chain: seed 001's C# (an async method per link awaiting the previous task) ----------
    static async Task<int> AddOne(Task<int> input) { return 1 + await input; }

    static async Task<int> AddOneYield(Task<int> input)
    {
        var result = 1 + await input;
        await Task.Yield();
        return result;
    }

    static long Chain(int n, bool yield)
    {
        var tcs = new TaskCompletionSource<int>();
        Task<int> right = tcs.Task;
        for (int i = 0; i < n; i++) right = yield ? AddOneYield(right) : AddOne(right);
        tcs.SetResult(0);
        return right.Result;
    }

#if CORECLR
    // ---- chain_channels: seed 001's channel program ------------------------------------------
    static async Task AddOne(ChannelWriter<int> output, ChannelReader<int> input)
    {
        await output.WriteAsync(1 + await input.ReadAsync());
    }

    static long ChainChannels(int n)
    {
        var first = Channel.CreateBounded<int>(1);
        var output = first;
        for (int i = 0; i < n; i++)
        {
            var input = Channel.CreateBounded<int>(1);
            AddOne(output.Writer, input.Reader);
            output = input;
        }
        output.Writer.WriteAsync(0);
        return first.Reader.ReadAsync().AsTask().Result;
    }
#endif

    // ---- skynet --------------------------------------------------------------------------------
    static async Task<long> Skynet(long num, long size)
    {
        if (size == 1) return num;
        long sub = size / 10;
        var kids = new Task<long>[10];
        for (int i = 0; i < 10; i++)
        {
            long n = num + i * sub;
            kids[i] = Task.Run(() => Skynet(n, sub));
        }
        long sum = 0;
        foreach (var v in await Task.WhenAll(kids)) sum += v;
        return sum;
    }

    // ---- recursive_count: seed 001's fix, each level deferred with Task.Run -----------------
    static async Task<int> Count(int n)
    {
        if (n == 0) return 0;
        return 1 + await Task.Run(() => Count(n - 1));
    }

    // ---- yield_storm -------------------------------------------------------------------------
    static async Task<long> Yielder(int yields)
    {
        long done = 0;
        for (int i = 0; i < yields; i++) { await Task.Yield(); done++; }
        return done;
    }

    static long YieldStorm(int tasks, int yields)
    {
        var all = new Task<long>[tasks];
        for (int i = 0; i < tasks; i++) all[i] = Task.Run(() => Yielder(yields));
        long sum = 0;
        foreach (var v in Task.WhenAll(all).Result) sum += v;
        return sum;
    }

    // ---- ping_pong: a TaskCompletionSource per hop -----------------------------------------------
    sealed class Court
    {
        public TaskCompletionSource<long> ToPong = New(), ToPing = New();
        public static TaskCompletionSource<long> New()
        {
            return new TaskCompletionSource<long>(TaskCreationOptions.RunContinuationsAsynchronously);
        }
    }

    static async Task<long> Ping(Court c, int rounds)
    {
        long ball = 0;
        for (int i = 0; i < rounds; i++)
        {
            var back = Court.New();
            c.ToPing = back;
            c.ToPong.SetResult(ball);
            ball = await back.Task;
        }
        return ball;
    }

    static async Task Pong(Court c, int rounds)
    {
        for (int i = 0; i < rounds; i++)
        {
            long ball = await c.ToPong.Task;
            c.ToPong = Court.New();
            c.ToPing.SetResult(ball + 1);
        }
    }

    static long PingPong(int rounds)
    {
        var c = new Court();
        var pong = Task.Run(() => Pong(c, rounds));
        var ping = Task.Run(() => Ping(c, rounds));
        long r = ping.Result;
        pong.Wait();
        return r;
    }

#if CORECLR
    static long PingPongChannels(int rounds)
    {
        var toPong = Channel.CreateBounded<long>(1);
        var toPing = Channel.CreateBounded<long>(1);
        var pong = Task.Run(async () =>
        {
            for (int i = 0; i < rounds; i++) await toPing.Writer.WriteAsync(1 + await toPong.Reader.ReadAsync());
        });
        var ping = Task.Run(async () =>
        {
            long ball = 0;
            for (int i = 0; i < rounds; i++)
            {
                await toPong.Writer.WriteAsync(ball);
                ball = await toPing.Reader.ReadAsync();
            }
            return ball;
        });
        long r = ping.Result;
        pong.Wait();
        return r;
    }
#endif

    // ---- jobs_100 (seed 004) -------------------------------------------------------------------
    static int JobDelay(int i) { return 10 + (i * 37) % 41; }

#if CORECLR
    static async Task RunJob(ChannelWriter<int> writer, int id, int delay)
    {
        await Task.Delay(delay); // simulated I/O
        await writer.WriteAsync(id);
    }

    static async Task<long> Receive(ChannelReader<int> reader)
    {
        long sum = 0;
        while (await reader.WaitToReadAsync())
        {
            int id;
            while (reader.TryRead(out id)) sum += id;
        }
        return sum;
    }

    static long JobsChannel(int n)
    {
        var channel = Channel.CreateUnbounded<int>();
        var receive = Receive(channel.Reader);
        var processing = new List<Task>();
        for (int i = 0; i < n; i++) processing.Add(RunJob(channel.Writer, i, JobDelay(i)));
        Task.WhenAll(processing).ContinueWith(_ => channel.Writer.Complete());
        return receive.Result;
    }
#endif

    static long JobsWhenAll(int n)
    {
        var jobs = new Task<int>[n];
        for (int i = 0; i < n; i++)
        {
            int id = i;
            jobs[i] = Task.Run(async () => { await Task.Delay(JobDelay(id)); return id; });
        }
        long sum = 0;
        foreach (var v in Task.WhenAll(jobs).Result) sum += v;
        return sum;
    }

    static long JobsParallelFor(int n, int degree)
    {
        long sum = 0;
        Parallel.For(0, n, new ParallelOptions { MaxDegreeOfParallelism = degree }, i =>
        {
            Task.Delay(JobDelay(i)).Wait(); // seed 004's Parallel.For body: blocks its thread
            Interlocked.Add(ref sum, i);
        });
        return sum;
    }

    // ---- for_async_1m ------------------------------------------------------------------------
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    static void NoOp(int i) { }

    static long ParallelFor(int n)
    {
        long ran = 0;
        Parallel.For(0, n, () => 0L, (i, state, local) => { NoOp(i); return local + 1; },
                     local => Interlocked.Add(ref ran, local));
        return ran;
    }

    // ---- channels --------------------------------------------------------------------------------
#if CORECLR
    static long ChannelRun(int n, int producers, int consumers, Channel<long> ch)
    {
        var ps = new Task[producers];
        for (int p = 0; p < producers; p++)
        {
            long lo = (long)n * p / producers, hi = (long)n * (p + 1) / producers;
            ps[p] = Task.Run(async () => { for (long i = lo; i < hi; i++) await ch.Writer.WriteAsync(i); });
        }
        var cs = new Task<long>[consumers];
        for (int c = 0; c < consumers; c++)
        {
            cs[c] = Task.Run(async () =>
            {
                long sum = 0;
                while (await ch.Reader.WaitToReadAsync())
                {
                    long v;
                    while (ch.Reader.TryRead(out v)) sum += v;
                }
                return sum;
            });
        }
        Task.WaitAll(ps);
        ch.Writer.Complete();
        long total = 0;
        foreach (var v in Task.WhenAll(cs).Result) total += v;
        return total;
    }

    static Channel<long> Bounded(bool single)
    {
        return Channel.CreateBounded<long>(new BoundedChannelOptions(1024) { SingleReader = single, SingleWriter = single });
    }

    static Channel<long> Unbounded(bool single)
    {
        return Channel.CreateUnbounded<long>(new UnboundedChannelOptions { SingleReader = single, SingleWriter = single });
    }
#endif

    static long BlockingCollectionRun(int n, int producers, int consumers, int capacity)
    {
        var bc = capacity > 0 ? new BlockingCollection<long>(capacity) : new BlockingCollection<long>();
        var ps = new Task[producers];
        for (int p = 0; p < producers; p++)
        {
            long lo = (long)n * p / producers, hi = (long)n * (p + 1) / producers;
            ps[p] = Task.Factory.StartNew(() => { for (long i = lo; i < hi; i++) bc.Add(i); }, TaskCreationOptions.LongRunning);
        }
        var cs = new Task<long>[consumers];
        for (int c = 0; c < consumers; c++)
        {
            cs[c] = Task.Factory.StartNew(() =>
            {
                long sum = 0;
                foreach (var v in bc.GetConsumingEnumerable()) sum += v;
                return sum;
            }, TaskCreationOptions.LongRunning);
        }
        Task.WaitAll(ps);
        bc.CompleteAdding();
        long total = 0;
        foreach (var t in cs) total += t.Result;
        return total;
    }

    // ---- thread injection: seed 000's programs ------------------------------------------------------
    static long SyncOverAsync(Recorder rec)
    {
        var tcs = new TaskCompletionSource<bool>();
        var tasks = new List<Task>();
        for (int i = 0; i < Environment.ProcessorCount * 4; i++)
        {
            tasks.Add(Task.Run(() =>
            {
                rec.Start();
                tcs.Task.Wait();
            }));
        }
        tasks.Add(Task.Run(() => { rec.Start(); tcs.SetResult(true); }));
        Task.WaitAll(tasks.ToArray());
        return tasks.Count;
    }

    static long BarrierRun(Recorder rec)
    {
        var barrier = new Barrier(Environment.ProcessorCount * 2 + 1 + 1);
        int n = Environment.ProcessorCount * 2 + 1;
        for (int i = 0; i < n; i++)
        {
            ThreadPool.QueueUserWorkItem(id =>
            {
                rec.Start();
                barrier.SignalAndWait();
            }, i);
        }
        barrier.SignalAndWait();
        return n;
    }

    // ---- for_async_delay_100: seed 000's Parallel.ForAsync(0, 100, async (i, ct) => await Task.Delay(1)) ----
    // .NET Core 3.1 and Mono have no Parallel.ForAsync (.NET 8): this is its shape. `degree` workers
    // (Task.Run) each take the next index with one Interlocked.Increment and await the body; the
    // default degree is Environment.ProcessorCount, as ForAsync's.
    static async Task ForAsyncWorker(int[] next, int toExclusive, Func<int, Task> body)
    {
        int i;
        while ((i = Interlocked.Increment(ref next[0]) - 1) < toExclusive) await body(i);
    }

    static long ForAsyncDelay(int n, int degree)
    {
        long ran = 0;
        var next = new int[1];
        Func<int, Task> body = async i => { await Task.Delay(1); Interlocked.Increment(ref ran); };
        var workers = new Task[degree];
        for (int w = 0; w < degree; w++) workers[w] = Task.Run(() => ForAsyncWorker(next, n, body));
        Task.WaitAll(workers);
        return Interlocked.Read(ref ran);
    }

    // ---- multiple_serial: seed 000's MultipleSerial (ArrayPool rent/clear x 8, Task.Yield, return x 8) ----
    static readonly byte[][] NestedArrays = new byte[8][];

    [MethodImpl(MethodImplOptions.NoInlining)]
    static byte IterateAll(byte[] arr)
    {
        byte ret = default(byte);
        foreach (byte item in arr) ret = item;
        return ret;
    }

    static async Task<long> MultipleSerial(int iterations)
    {
        long checksum = 0;
        for (int i = 0; i < iterations; i++)
        {
            for (int j = 0; j < NestedArrays.Length; j++)
            {
                NestedArrays[j] = ArrayPool<byte>.Shared.Rent(4096);
                NestedArrays[j].AsSpan().Clear();
            }
            await Task.Yield();
            for (int j = NestedArrays.Length - 1; j >= 0; j--)
            {
                checksum += IterateAll(NestedArrays[j]);
                ArrayPool<byte>.Shared.Return(NestedArrays[j]);
            }
            checksum++;
        }
        return checksum;
    }

    // ---- rw_lock_stress: seed 000's ReaderWriterLockSlim program, 2 s (quick 0.3 s) instead of 10 s ----
    static long RwLockStress(bool quick)
    {
        int ms = quick ? 300 : 2000, env;
        if (int.TryParse(Environment.GetEnvironmentVariable("TPL_BENCH_RW_MS"), out env) && env > 0) ms = env;
        var rwl = new ReaderWriterLockSlim();
        var tasks = new Task[100];
        long count = 0, acquisitions = 0, maxTicks = 0;
        DateTime end = DateTime.UtcNow + TimeSpan.FromMilliseconds(ms);
        while (DateTime.UtcNow < end)
        {
            for (int i = 0; i < 100; ++i)
            {
                tasks[i] = Task.Run(() =>
                {
                    var sw = Stopwatch.StartNew();
                    rwl.EnterReadLock();
                    rwl.ExitReadLock();
                    sw.Stop();
                    Interlocked.Increment(ref acquisitions);
                    if (sw.ElapsedMilliseconds >= 10) Interlocked.Increment(ref count);
                    long t = sw.ElapsedTicks, seen;
                    while (t > (seen = Interlocked.Read(ref maxTicks)) && Interlocked.CompareExchange(ref maxTicks, t, seen) != seen) { }
                });
            }
            Task.WaitAll(tasks);
        }
        Console.Error.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "  rw_lock_stress: {0} acquisitions, longest {1:F1} us, {2} took >= 10 ms",
            acquisitions, maxTicks * 1e6 / Stopwatch.Frequency, count));
        return count;
    }

    // ---- async_generator: `await foreach` over an async iterator of n ints ------------------------------
    // What the C# 8 compiler makes of
    //     static async IAsyncEnumerable<int> Ints(int n) { for (int i = 0; i < n; i++) yield return i; }
    // (mcs predates C# 8): the state machine runs through AsyncIteratorMethodBuilder, MoveNextAsync's
    // ValueTask<bool> is backed by a ManualResetValueTaskSourceCore<bool> and comes back completed
    // when the body reaches its next `yield return` without waiting, as here.
    sealed class IntsIterator : IAsyncEnumerable<int>, IAsyncEnumerator<int>, IValueTaskSource<bool>, IAsyncStateMachine
    {
        const int NotStarted = -3, Running = -1, Finished = -2, AtYield = -4;
        readonly int n;
        int state = NotStarted, i, current;
        AsyncIteratorMethodBuilder builder = AsyncIteratorMethodBuilder.Create();
        ManualResetValueTaskSourceCore<bool> promise;

        public IntsIterator(int n) { this.n = n; }

        public IAsyncEnumerator<int> GetAsyncEnumerator(CancellationToken token) { return this; }
        public int Current { get { return current; } }

        public ValueTask<bool> MoveNextAsync()
        {
            if (state == Finished) return default(ValueTask<bool>);
            promise.Reset();
            var self = this;
            builder.MoveNext(ref self);
            short version = promise.Version;
            if (promise.GetStatus(version) == ValueTaskSourceStatus.Succeeded)
                return new ValueTask<bool>(promise.GetResult(version));
            return new ValueTask<bool>(this, version);
        }

        void IAsyncStateMachine.MoveNext()
        {
            try
            {
                if (state == NotStarted) i = 0;
                else ++i;  // resumed after a yield return
                state = Running;
                if (i < n)
                {
                    current = i;
                    state = AtYield;
                    promise.SetResult(true);
                    return;
                }
            }
            catch (Exception e)
            {
                state = Finished;
                builder.Complete();
                promise.SetException(e);
                return;
            }
            state = Finished;
            builder.Complete();
            promise.SetResult(false);
        }

        void IAsyncStateMachine.SetStateMachine(IAsyncStateMachine machine) { }
        public ValueTask DisposeAsync() { state = Finished; return default(ValueTask); }
        bool IValueTaskSource<bool>.GetResult(short token) { return promise.GetResult(token); }
        ValueTaskSourceStatus IValueTaskSource<bool>.GetStatus(short token) { return promise.GetStatus(token); }
        void IValueTaskSource<bool>.OnCompleted(Action<object> continuation, object st, short token, ValueTaskSourceOnCompletedFlags flags)
        {
            promise.OnCompleted(continuation, st, token, flags);
        }
    }

    // `long sum = 0; await foreach (int v in Ints(n)) sum += v;` as the compiler lowers it.
    static async Task<long> SumAwaitForeach(int n)
    {
        long sum = 0;
        IAsyncEnumerator<int> e = new IntsIterator(n).GetAsyncEnumerator(default(CancellationToken));
        try
        {
            while (await e.MoveNextAsync()) sum += e.Current;
        }
        finally
        {
            if (e != null) await e.DisposeAsync();
        }
        return sum;
    }

    static List<Method> Methods()
    {
        var m = new List<Method>();
#if CORECLR
        // On Mono these two overflow the stack (continuations run inline, no depth guard):
        // seed 001's point. CoreCLR's awaits check the stack and defer when it runs low.
        m.Add(new Method("chain", "async Task<int> per link (seed 001)", (q, r) => Chain(Pick(q, 1000000, 100000), false)));
#endif
        m.Add(new Method("chain", "async per link + Task.Yield (seed 001)", (q, r) => Chain(Pick(q, 1000000, 100000), true)));
#if CORECLR
        m.Add(new Method("chain_channels", "async method + bounded(1) Channel per link", (q, r) => ChainChannels(Pick(q, 1000000, 100000))));
#endif
        m.Add(new Method("skynet", "Task.Run + Task.WhenAll", (q, r) => Skynet(0, Pick(q, 1000000, 100000)).Result));
#if CORECLR
        m.Add(new Method("recursive_count", "await Task.Run per level (seed 001)", (q, r) => Count(Pick(q, 1000000, 100000)).Result));
#endif
        m.Add(new Method("yield_storm", "Task.Run + await Task.Yield()", (q, r) => YieldStorm(Pick(q, 1000, 100), 1000)));
        m.Add(new Method("ping_pong", "TCS per hop, RunContinuationsAsynchronously", (q, r) => PingPong(Pick(q, 100000, 10000))));
#if CORECLR
        m.Add(new Method("ping_pong", "2 bounded(1) Channels", (q, r) => PingPongChannels(Pick(q, 100000, 10000))));
        m.Add(new Method("jobs_100", "Channel fan-in (seed 004)", (q, r) => JobsChannel(Pick(q, 100, 20))));
#endif
        m.Add(new Method("jobs_100", "Task.Delay per job + WhenAll", (q, r) => JobsWhenAll(Pick(q, 100, 20))));
        m.Add(new Method("jobs_100", "Parallel.For @ 4 (seed 004)", (q, r) => JobsParallelFor(Pick(q, 100, 20), 4)));
        m.Add(new Method("for_async_1m", "Parallel.For with thread-local counts", (q, r) => ParallelFor(Pick(q, 1000000, 100000))));
#if CORECLR
        m.Add(new Method("channel_spsc_bounded", "Channel bounded(1024), single reader/writer", (q, r) => ChannelRun(Pick(q, 10000000, 1000000), 1, 1, Bounded(true))));
        m.Add(new Method("channel_spsc_unbounded", "Channel unbounded, single reader/writer", (q, r) => ChannelRun(Pick(q, 10000000, 1000000), 1, 1, Unbounded(true))));
        m.Add(new Method("channel_mpmc_bounded", "Channel bounded(1024)", (q, r) => ChannelRun(Pick(q, 10000000, 1000000), 2, 2, Bounded(false))));
        m.Add(new Method("channel_mpmc_unbounded", "Channel unbounded", (q, r) => ChannelRun(Pick(q, 10000000, 1000000), 2, 2, Unbounded(false))));
#else
        m.Add(new Method("channel_spsc_bounded", "BlockingCollection(1024), 2 threads", (q, r) => BlockingCollectionRun(Pick(q, 10000000, 1000000), 1, 1, 1024)));
        m.Add(new Method("channel_spsc_unbounded", "BlockingCollection, 2 threads", (q, r) => BlockingCollectionRun(Pick(q, 10000000, 1000000), 1, 1, 0)));
        m.Add(new Method("channel_mpmc_bounded", "BlockingCollection(1024), 4 threads", (q, r) => BlockingCollectionRun(Pick(q, 10000000, 1000000), 2, 2, 1024)));
        m.Add(new Method("channel_mpmc_unbounded", "BlockingCollection, 4 threads", (q, r) => BlockingCollectionRun(Pick(q, 10000000, 1000000), 2, 2, 0)));
#endif
        m.Add(new Method("sync_over_async", "Task.Run + tcs.Task.Wait() (seed 000)", (q, r) => SyncOverAsync(r), true));
        m.Add(new Method("barrier", "QueueUserWorkItem + Barrier (seed 000)", (q, r) => BarrierRun(r), true));
        m.Add(new Method("for_async_delay_100", "ForAsync shape @ProcessorCount, await Task.Delay(1)", (q, r) => ForAsyncDelay(100, Environment.ProcessorCount)));
        m.Add(new Method("for_async_delay_100", "ForAsync shape @100, await Task.Delay(1)", (q, r) => ForAsyncDelay(100, 100)));
#if CORECLR
        // Not on Mono: its JIT spends ~50 us an iteration in IterateAll's byte loop (6 s a run), a
        // figure about its code generation, not its pool.
        m.Add(new Method("multiple_serial", "ArrayPool rent/clear x 8, Task.Yield, return x 8 (seed 000)", (q, r) => MultipleSerial(Pick(q, 100000, 10000)).Result));
#endif
        m.Add(new Method("rw_lock_stress", "ReaderWriterLockSlim, 100 Task.Run a round (seed 000)", (q, r) => RwLockStress(q)));
        m.Add(new Method("async_generator", "await foreach over an async iterator (lowered by hand)", (q, r) => SumAwaitForeach(Pick(q, 1000000, 100000)).Result));
#if CORECLR
        m.Add(new Method("files_seq_read", "FileStream.ReadAsync 64 KiB", (q, r) => FilesSeqRead(q).Result));
        m.Add(new Method("files_rand_read", "FileStream Seek + ReadAsync 4 KiB", (q, r) => FilesRandRead(q, 1)));
        m.Add(new Method("files_rand_read_16", "16 tasks, each Seek + ReadAsync 4 KiB on a FileStream of its own", (q, r) => FilesRandRead(q, 16)));
        m.Add(new Method("files_seq_write", "FileStream.WriteAsync 64 KiB", (q, r) => FilesSeqWrite(q).Result));
        m.Add(new Method("files_rand_write", "FileStream Seek + WriteAsync 4 KiB", (q, r) => FilesRandWrite(q).Result));
#endif
        return m;
    }

#if CORECLR
    // ---- files groups (bench/groups.py): FileStream on the file bench/run.py prepared ------------
    // TPL_BENCH_FILE: 4 KiB blocks, block b filled with the byte b mod 256, in the page cache;
    // sequential writes go to TPL_BENCH_WRITE_FILE. Every FileStream is opened with
    // FileOptions.Asynchronous and a buffer size of 1 (no FileStream buffer: each ReadAsync or
    // WriteAsync is one system call, as in the other programs). .NET Core 3.1 has no RandomAccess
    // (.NET 6): a positional read is Seek + ReadAsync, on a FileStream of the reader's own.
    const int FileBlock = 4096, FileSeqChunk = 64 << 10;

    static long FilesReadBytes(bool quick) { return quick ? 16L << 20 : 1L << 30; }

    static string FilesEnvPath(string name)
    {
        string p = Environment.GetEnvironmentVariable(name);
        if (string.IsNullOrEmpty(p))
        {
            Console.Error.WriteLine(name + " is not set (bench/run.py prepares the file)");
            Environment.Exit(2);
        }
        return p;
    }

    // The LCG every program of the files groups uses: byte offsets of random blocks of the region.
    static long[] RandomOffsets(int count, long region)
    {
        ulong x = 42, blocks = (ulong)(region / FileBlock);
        var offsets = new long[count];
        for (int i = 0; i < count; i++)
        {
            unchecked { x = x * 6364136223846793005UL + 1442695040888963407UL; }
            offsets[i] = (long)((x >> 33) % blocks) * FileBlock;
        }
        return offsets;
    }

    static FileStream OpenFile(string path, FileMode mode, FileAccess access)
    {
        return new FileStream(path, mode, access, FileShare.ReadWrite, 1, FileOptions.Asynchronous);
    }

    // Fills buf with the blocks that start at firstBlock (one Array.Fill per block).
    static void FillBlocks(byte[] buf, long firstBlock)
    {
        for (int b = 0; b < buf.Length / FileBlock; b++)
            Array.Fill(buf, unchecked((byte)(firstBlock + b)), b * FileBlock, FileBlock);
    }

    static async Task<long> FilesSeqRead(bool quick)
    {
        using (var fs = OpenFile(FilesEnvPath("TPL_BENCH_FILE"), FileMode.Open, FileAccess.Read))
        {
            var buf = new byte[FileSeqChunk];
            long limit = FilesReadBytes(quick), total = 0;
            while (total < limit)
            {
                int n = await fs.ReadAsync(buf, 0, (int)Math.Min(FileSeqChunk, limit - total));
                if (n <= 0) break;
                total += n;
            }
            return total;
        }
    }

    static async Task<long> ReadBlocks(string path, long[] offsets, int lo, int hi)
    {
        using (var fs = OpenFile(path, FileMode.Open, FileAccess.Read))
        {
            var buf = new byte[FileBlock];
            long sum = 0;
            for (int i = lo; i < hi; i++)
            {
                fs.Seek(offsets[i], SeekOrigin.Begin);
                for (int got = 0; got < FileBlock;)
                {
                    int n = await fs.ReadAsync(buf, got, FileBlock - got);
                    if (n <= 0) throw new IOException("end of file at " + offsets[i]);
                    got += n;
                }
                sum += buf[0];
            }
            return sum;
        }
    }

    // The random reads split over `readers`: 1 awaits on the calling thread; more start a task each.
    static long FilesRandRead(bool quick, int readers)
    {
        string path = FilesEnvPath("TPL_BENCH_FILE");
        long[] offsets = RandomOffsets(Pick(quick, 100000, 5000), FilesReadBytes(quick));
        var tasks = new Task<long>[readers];
        for (int r = 0; r < readers; r++)
        {
            int lo = offsets.Length * r / readers, hi = offsets.Length * (r + 1) / readers;
            tasks[r] = readers == 1 ? ReadBlocks(path, offsets, lo, hi) : Task.Run(() => ReadBlocks(path, offsets, lo, hi));
        }
        long sum = 0;
        foreach (var t in tasks) sum += t.Result;
        return sum;
    }

    static async Task<long> FilesSeqWrite(bool quick)
    {
        using (var fs = OpenFile(FilesEnvPath("TPL_BENCH_WRITE_FILE"), FileMode.Create, FileAccess.Write))
        {
            var chunk = new byte[FileSeqChunk];
            long size = quick ? 16L << 20 : 64L << 20, total = 0;
            for (; total < size; total += FileSeqChunk)
            {
                FillBlocks(chunk, total / FileBlock);
                await fs.WriteAsync(chunk, 0, FileSeqChunk);
            }
            return total;
        }
    }

    // Rewrites random blocks of the read file in place, each with the bytes it holds.
    static async Task<long> FilesRandWrite(bool quick)
    {
        using (var fs = OpenFile(FilesEnvPath("TPL_BENCH_FILE"), FileMode.Open, FileAccess.Write))
        {
            var block = new byte[FileBlock];
            long total = 0;
            foreach (long off in RandomOffsets(Pick(quick, 25000, 1000), FilesReadBytes(quick)))
            {
                FillBlocks(block, off / FileBlock);
                fs.Seek(off, SeekOrigin.Begin);
                await fs.WriteAsync(block, 0, FileBlock);
                total += FileBlock;
            }
            return total;
        }
    }
#endif

#if CORECLR
    // ---- servers of the server groups (--serve; bench/peers/README.md, "Server groups") ----------
    // A sync_over_async_server request: a fixed-size message echoed back; one whose first byte is
    // 'B' is answered after the handler has waited synchronously for a 100 ms delay (seed 002).
    const int FramedMessageSize = 64;
    const int BlockingHandlerWaitMs = 100;

    sealed class Server
    {
        public string Kind, Name;
        public Func<Socket, Task> Handle;
        public Server(string k, string n, Func<Socket, Task> h) { Kind = k; Name = n; Handle = h; }
    }

    static Server[] Servers()
    {
        return new[] {
            new Server("echo", "Socket.ReceiveAsync/SendAsync, a task per connection", Echo),
            new Server("plaintext", "Socket, a task per connection, minimal parser", Http),
            new Server("sync_over_async_server", "a task per connection, Task.Delay(100).Wait()", BlockingEcho),
        };
    }

    static async Task AcceptLoop(Socket listener, Func<Socket, Task> handle)
    {
        for (;;)
        {
            Socket s = await listener.AcceptAsync();
            s.NoDelay = true;
            var connection = handle(s);  // runs on its own
        }
    }

    static async Task SendAll(Socket s, byte[] buf, int count)
    {
        for (int sent = 0; sent < count;)
            sent += await s.SendAsync(new ArraySegment<byte>(buf, sent, count - sent), SocketFlags.None);
    }

    static async Task Echo(Socket s)
    {
        var buf = new byte[4096];
        try
        {
            for (int n; (n = await s.ReceiveAsync(new ArraySegment<byte>(buf), SocketFlags.None)) > 0;)
                await SendAll(s, buf, n);
        }
        catch (Exception) { }  // a reset ends this connection only
        finally { s.Dispose(); }
    }

    static async Task BlockingEcho(Socket s)
    {
        var buf = new byte[FramedMessageSize];
        try
        {
            for (;;)
            {
                for (int got = 0; got < FramedMessageSize;)
                {
                    int n = await s.ReceiveAsync(new ArraySegment<byte>(buf, got, FramedMessageSize - got), SocketFlags.None);
                    if (n == 0) return;
                    got += n;
                }
                if (buf[0] == (byte)'B') Task.Delay(BlockingHandlerWaitMs).Wait();
                await SendAll(s, buf, FramedMessageSize);
            }
        }
        catch (Exception) { }
        finally { s.Dispose(); }
    }

    static readonly byte[] HelloResponse = Encoding.ASCII.GetBytes(
        "HTTP/1.1 200 OK\r\nServer: dotnet\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!");
    static readonly byte[] EndOfHeaders = Encoding.ASCII.GetBytes("\r\n\r\n");

    // HTTP/1.1 with a minimal parser: every request ends at its empty line (GET, no body); the
    // answers to what one receive brought in go out in one send (pipelining).
    static async Task Http(Socket s)
    {
        var buf = new byte[4096];
        var answers = new byte[HelloResponse.Length * 16];
        int matched = 0;  // bytes of EndOfHeaders seen so far
        try
        {
            for (int n; (n = await s.ReceiveAsync(new ArraySegment<byte>(buf), SocketFlags.None)) > 0;)
            {
                int requests = 0;
                for (int i = 0; i < n; i++)
                {
                    if (buf[i] == EndOfHeaders[matched]) matched++;
                    else matched = buf[i] == (byte)'\r' ? 1 : 0;
                    if (matched == EndOfHeaders.Length) { requests++; matched = 0; }
                }
                if (requests == 0) continue;
                if (answers.Length < requests * HelloResponse.Length) answers = new byte[requests * HelloResponse.Length];
                for (int r = 0; r < requests; r++)
                    Buffer.BlockCopy(HelloResponse, 0, answers, r * HelloResponse.Length, HelloResponse.Length);
                await SendAll(s, answers, requests * HelloResponse.Length);
            }
        }
        catch (Exception) { }
        finally { s.Dispose(); }
    }

    static int Serve(string kind, string name)
    {
        foreach (var server in Servers())
        {
            if (server.Kind != kind || server.Name != name) continue;
            var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            listener.Listen(4096);
            Console.WriteLine("listening on 127.0.0.1:" + ((IPEndPoint)listener.LocalEndPoint).Port.ToString(CultureInfo.InvariantCulture));
            Console.Out.Flush();
            AcceptLoop(listener, server.Handle).Wait();
            return 0;
        }
        Console.Error.WriteLine("no server " + kind + " / " + name);
        return 2;
    }
#endif

    static long Allocated()
    {
#if CORECLR
        return GC.GetTotalAllocatedBytes(true);
#else
        return -1;
#endif
    }

    static string Esc(string s) { return s.Replace("\\", "\\\\").Replace("\"", "\\\""); }

    static int Main(string[] args)
    {
        bool quick = false, list = false, serving = false;
        string group = null, name = null;
        for (int i = 0; i < args.Length; i++)
        {
            if (args[i] == "--quick") quick = true;
            else if (args[i] == "--list") list = true;
            else if ((args[i] == "--run" || args[i] == "--serve") && i + 2 < args.Length)
            {
                serving = args[i] == "--serve";
                group = args[++i];
                name = args[++i];
            }
        }
        var methods = Methods();
        if (list)
        {
            foreach (var m in methods) Console.WriteLine(m.Group + "\t" + m.Name);
#if CORECLR
            foreach (var server in Servers()) Console.WriteLine(server.Kind + "\t" + server.Name);
#endif
            return 0;
        }
#if CORECLR
        if (serving) return Serve(group, name);
#endif
        foreach (var m in methods)
        {
            if (m.Group != group || m.Name != name) continue;
            if (!m.NoWarmup) m.Run(true, new Recorder());
            long a0 = Allocated();
            var rec = new Recorder();
            var sw = Stopwatch.StartNew();
            long sum = m.Run(quick, rec);
            double ms = sw.Elapsed.TotalMilliseconds;
            long a1 = Allocated();
            var sb = new StringBuilder();
            sb.Append(string.Format(CultureInfo.InvariantCulture,
                "{{\"group\": \"{0}\", \"method\": \"{1}\", \"ms\": {2:F6}, \"checksum\": {3}, \"allocated_bytes\": {4}",
                Esc(m.Group), Esc(m.Name), ms, sum, a0 >= 0 ? (a1 - a0).ToString(CultureInfo.InvariantCulture) : "null"));
            lock (rec.Starts)
            {
                if (rec.Starts.Count > 0)
                {
                    sb.Append(", \"starts_ms\": [");
                    for (int i = 0; i < rec.Starts.Count; i++)
                        sb.Append(i == 0 ? "" : ", ").Append(rec.Starts[i].ToString("F6", CultureInfo.InvariantCulture));
                    sb.Append("]");
                }
            }
            sb.Append("}");
            Console.WriteLine(sb.ToString());
            Console.Out.Flush();
            Environment.Exit(0);
        }
        Console.Error.WriteLine("no method " + group + " / " + name);
        return 2;
    }
}
