// Java peer of tpl's benchmark workloads (see bench/peers/README.md for the protocol):
//
//   java Peer --list                             one "<group>\t<method>" line per method
//   java Peer --run <group> <method> [--quick]   warm-up at the quick size, one measured run,
//                                                one JSON line on stdout
//   java Peer --serve <kind> <method>            a server of a server group: listens on
//                                                127.0.0.1 (a port the kernel picks), prints
//                                                "listening on 127.0.0.1:PORT", serves until killed
//
// Written as a Java 21+ programmer would: virtual threads with blocking queues where Go would use
// goroutines and channels, ForkJoinPool / parallel streams / CompletableFuture for fork-join and
// task chains; for I/O, a virtual thread per connection on blocking java.net sockets (the JDK parks
// the virtual thread and waits on its poller) and FileChannel for files. Needs JDK 21+
// (virtual threads).
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.*;
import java.util.stream.IntStream;

public final class Peer {
  interface Body { long run(boolean quick, Recorder rec) throws Exception; }

  record Method(String group, String name, Body body, boolean noWarmup) {
    Method(String group, String name, Body body) { this(group, name, body, false); }
  }

  /** Per-item start times (thread-injection timelines). */
  static final class Recorder {
    final long t0 = System.nanoTime();
    final List<Double> starts = new ArrayList<>();
    synchronized void start() { starts.add((System.nanoTime() - t0) / 1e6); }
  }

  static int pick(boolean quick, int full, int small) { return quick ? small : full; }
  static int cores() { return Runtime.getRuntime().availableProcessors(); }

  // ---- chain: CompletableFuture per link ------------------------------------------------------
  static long chain(int n) {
    CompletableFuture<Long> source = new CompletableFuture<>();
    CompletableFuture<Long> f = source;
    for (int i = 0; i < n; i++) f = f.thenApply(v -> v + 1);
    source.complete(0L);
    return f.join();
  }

  // ---- chain_channels: seed 001's Go program, a virtual thread + SynchronousQueue per link ----
  static long chainChannels(int n) throws Exception {
    SynchronousQueue<Long> finalOutput = new SynchronousQueue<>();
    SynchronousQueue<Long> right = finalOutput;
    for (int i = 0; i < n; i++) {
      SynchronousQueue<Long> left = right;
      SynchronousQueue<Long> in = new SynchronousQueue<>();
      Thread.ofVirtual().start(() -> {
        try {
          left.put(1 + in.take());
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      });
      right = in;
    }
    right.put(0L);
    return finalOutput.take();
  }

  // ---- skynet -------------------------------------------------------------------------------
  static final class Skynet extends RecursiveTask<Long> {
    final long num, size;
    Skynet(long num, long size) { this.num = num; this.size = size; }
    @Override protected Long compute() {
      if (size == 1) return num;
      long sub = size / 10;
      Skynet[] kids = new Skynet[10];
      for (int i = 0; i < 10; i++) kids[i] = new Skynet(num + i * sub, sub);
      for (int i = 1; i < 10; i++) kids[i].fork();
      long sum = kids[0].compute();
      for (int i = 1; i < 10; i++) sum += kids[i].join();
      return sum;
    }
  }

  // ---- fib: binary fork-join, every call with n >= 2 forks one child and computes the other ----
  static final class Fib extends RecursiveTask<Long> {
    final int n;
    Fib(int n) { this.n = n; }
    @Override protected Long compute() {
      if (n < 2) return (long) n;
      Fib left = new Fib(n - 1);
      left.fork();
      long right = new Fib(n - 2).compute();
      return left.join() + right;
    }
  }

  // A ForkJoinPool of one worker per core, as the other runtimes get. The common pool has
  // cores - 1 workers (1 on a 2-core machine) and counts on the submitting thread, which works
  // only if it takes the root task back from the queue before a worker does.
  static final ForkJoinPool FORK_JOIN = new ForkJoinPool(cores());

  static long skynetVirtual(long num, long size) throws Exception {
    if (size == 1) return num;
    long sub = size / 10;
    List<FutureTask<Long>> kids = new ArrayList<>(10);
    for (int i = 0; i < 10; i++) {
      long n = num + i * sub;
      FutureTask<Long> t = new FutureTask<>(() -> skynetVirtual(n, sub));
      Thread.ofVirtual().start(t);
      kids.add(t);
    }
    long sum = 0;
    for (FutureTask<Long> t : kids) sum += t.get();
    return sum;
  }

  // ---- recursive_count: each level deferred through the common pool --------------------------
  static CompletableFuture<Long> count(int n) {
    if (n == 0) return CompletableFuture.completedFuture(0L);
    return CompletableFuture.supplyAsync(() -> count(n - 1)).thenCompose(f -> f).thenApply(v -> v + 1);
  }

  // ---- yield_storm -----------------------------------------------------------------------------
  static long yieldStorm(int tasks, int yields) throws Exception {
    LongAdderLite total = new LongAdderLite();
    List<Thread> ts = new ArrayList<>(tasks);
    for (int t = 0; t < tasks; t++) {
      ts.add(Thread.ofVirtual().start(() -> {
        long done = 0;
        for (int i = 0; i < yields; i++) {
          Thread.yield();
          done++;
        }
        total.add(done);
      }));
    }
    for (Thread t : ts) t.join();
    return total.get();
  }

  static final class LongAdderLite {
    private final java.util.concurrent.atomic.AtomicLong v = new java.util.concurrent.atomic.AtomicLong();
    void add(long x) { v.addAndGet(x); }
    long get() { return v.get(); }
  }

  // ---- ping_pong ---------------------------------------------------------------------------------
  static long pingPong(int rounds) throws Exception {
    SynchronousQueue<Long> toPong = new SynchronousQueue<>(), toPing = new SynchronousQueue<>();
    Thread pong = Thread.ofVirtual().start(() -> {
      try {
        for (int i = 0; i < rounds; i++) toPing.put(toPong.take() + 1);
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    long[] ball = {0};
    Thread ping = Thread.ofVirtual().start(() -> {
      try {
        for (int i = 0; i < rounds; i++) {
          toPong.put(ball[0]);
          ball[0] = toPing.take();
        }
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
    });
    ping.join();
    pong.join();
    return ball[0];
  }

  // ---- jobs_100 (seed 004) -------------------------------------------------------------------
  static long jobDelay(int i) { return 10 + (i * 37L) % 41; }

  static long jobsFanIn(int n) throws Exception {
    LinkedBlockingQueue<Integer> ch = new LinkedBlockingQueue<>();
    try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < n; i++) {
        int id = i;
        ex.submit(() -> {
          Thread.sleep(jobDelay(id)); // simulated I/O
          ch.put(id);
          return null;
        });
      }
      long sum = 0;
      for (int i = 0; i < n; i++) sum += ch.take();
      return sum;
    }
  }

  static long jobsPool(int n, int threads) throws Exception {
    ExecutorService ex = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Integer>> fs = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        int id = i;
        fs.add(ex.submit(() -> {
          Thread.sleep(jobDelay(id));
          return id;
        }));
      }
      long sum = 0;
      for (Future<Integer> f : fs) sum += f.get();
      return sum;
    } finally {
      ex.shutdown();
    }
  }

  // ---- for_async_1m ------------------------------------------------------------------------------
  static void body(int i) {}

  static long parallelFor(int n) {
    return IntStream.range(0, n).parallel().mapToLong(i -> { body(i); return 1; }).sum();
  }

  static long virtualThreadPerBody(int n) throws Exception {
    java.util.concurrent.atomic.AtomicLong ran = new java.util.concurrent.atomic.AtomicLong();
    try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < n; i++) {
        int id = i;
        ex.execute(() -> { body(id); ran.incrementAndGet(); });
      }
    }
    return ran.get();
  }

  // ---- channels: blocking queues between virtual threads ----------------------------------------
  static final Long DONE = Long.MIN_VALUE;

  static long channel(int n, int producers, int consumers, BlockingQueue<Long> q) throws Exception {
    List<Thread> ps = new ArrayList<>();
    for (int p = 0; p < producers; p++) {
      long lo = (long) n * p / producers, hi = (long) n * (p + 1) / producers;
      ps.add(Thread.ofVirtual().start(() -> {
        try {
          for (long i = lo; i < hi; i++) q.put(i);
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      }));
    }
    long[] sums = new long[consumers];
    List<Thread> cs = new ArrayList<>();
    for (int c = 0; c < consumers; c++) {
      int idx = c;
      cs.add(Thread.ofVirtual().start(() -> {
        try {
          long sum = 0;
          for (Long v; (v = q.take()) != DONE; ) sum += v;
          sums[idx] = sum;
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      }));
    }
    for (Thread t : ps) t.join();
    for (int c = 0; c < consumers; c++) q.put(DONE);
    long total = 0;
    for (int c = 0; c < consumers; c++) {
      cs.get(c).join();
      total += sums[c];
    }
    return total;
  }

  // ---- thread injection (seed 000) ---------------------------------------------------------------
  static long syncOverAsyncPool(Recorder rec) {
    CompletableFuture<Void> tcs = new CompletableFuture<>();
    List<CompletableFuture<Void>> tasks = new ArrayList<>();
    for (int i = 0; i < 4 * cores(); i++) {
      tasks.add(CompletableFuture.runAsync(() -> { rec.start(); tcs.join(); }));
    }
    tasks.add(CompletableFuture.runAsync(() -> { rec.start(); tcs.complete(null); }));
    CompletableFuture.allOf(tasks.toArray(new CompletableFuture[0])).join();
    return tasks.size();
  }

  static long syncOverAsyncVirtual(Recorder rec) throws Exception {
    CompletableFuture<Void> tcs = new CompletableFuture<>();
    List<Thread> ts = new ArrayList<>();
    for (int i = 0; i < 4 * cores(); i++) {
      ts.add(Thread.ofVirtual().start(() -> { rec.start(); tcs.join(); }));
    }
    ts.add(Thread.ofVirtual().start(() -> { rec.start(); tcs.complete(null); }));
    for (Thread t : ts) t.join();
    return ts.size();
  }

  static long barrier(Recorder rec, ExecutorService ex) throws Exception {
    int n = 2 * cores() + 1;
    CyclicBarrier b = new CyclicBarrier(n + 1);
    for (int i = 0; i < n; i++) {
      ex.execute(() -> {
        rec.start();
        try {
          b.await();
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      });
    }
    b.await();
    ex.shutdown();
    return n;
  }

  // ---- for_async_delay_100: seed 000's Parallel.ForAsync over 100 bodies of Task.Delay(1) -----------
  // `degree` virtual threads take the next index from a shared counter until none is left (how
  // .NET's ForAsync and tpl's for_async hand out indices); each body sleeps 1 ms (a sleeping
  // virtual thread holds no carrier thread).
  static long forAsyncDelay(int n, int degree) throws Exception {
    java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicLong ran = new java.util.concurrent.atomic.AtomicLong();
    List<Thread> workers = new ArrayList<>(degree);
    for (int w = 0; w < degree; w++) {
      workers.add(Thread.ofVirtual().start(() -> {
        try {
          while (next.getAndIncrement() < n) {
            Thread.sleep(1);
            ran.incrementAndGet();
          }
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
      }));
    }
    for (Thread t : workers) t.join();
    return ran.get();
  }

  // ---- rw_lock_stress: seed 000's ReaderWriterLockSlim program with ReentrantReadWriteLock --------------
  // Rounds of 100 common-pool tasks that each take and release a read lock, for 2 s (quick: 0.3 s;
  // TPL_BENCH_RW_MS overrides, as for tpl). Checksum: acquisitions that took 10 ms or more.
  static long rwLockStress(boolean quick) {
    long ms = quick ? 300 : 2000;
    try {
      long v = Long.parseLong(System.getenv().getOrDefault("TPL_BENCH_RW_MS", ""));
      if (v > 0) ms = v;
    } catch (NumberFormatException e) {
      // not set: the default length
    }
    var rwl = new java.util.concurrent.locks.ReentrantReadWriteLock();
    var acquisitions = new java.util.concurrent.atomic.AtomicLong();
    var slow = new java.util.concurrent.atomic.AtomicLong();
    var maxNs = new java.util.concurrent.atomic.AtomicLong();
    long end = System.nanoTime() + ms * 1_000_000L;
    CompletableFuture<?>[] tasks = new CompletableFuture<?>[100];
    while (System.nanoTime() < end) {
      for (int i = 0; i < tasks.length; i++) {
        tasks[i] = CompletableFuture.runAsync(() -> {
          long t0 = System.nanoTime();
          rwl.readLock().lock();
          rwl.readLock().unlock();
          long ns = System.nanoTime() - t0;
          acquisitions.incrementAndGet();
          if (ns >= 10_000_000L) slow.incrementAndGet();
          maxNs.accumulateAndGet(ns, Math::max);
        });
      }
      CompletableFuture.allOf(tasks).join();
    }
    System.err.printf(java.util.Locale.ROOT, "  rw_lock_stress: %d acquisitions, longest %.1f us, %d took >= 10 ms%n",
        acquisitions.get(), maxNs.get() / 1000.0, slow.get());
    return slow.get();
  }

  // ---- files groups (bench/groups.py): FileChannel on the file bench/run.py prepared ---------------
  // TPL_BENCH_FILE: 4 KiB blocks, block b filled with the byte b mod 256, in the page cache;
  // sequential writes go to TPL_BENCH_WRITE_FILE. Direct buffers: a heap buffer would be copied
  // through a temporary direct one on every call.
  static final int FILE_BLOCK = 4096, FILE_SEQ_CHUNK = 64 << 10;

  static long filesReadBytes(boolean quick) { return quick ? 16L << 20 : 1L << 30; }

  static Path filesEnvPath(String name) {
    String p = System.getenv(name);
    if (p == null || p.isEmpty()) {
      System.err.println(name + " is not set (bench/run.py prepares the file)");
      System.exit(2);
    }
    return Path.of(p);
  }

  /** The LCG every program of the files groups uses: byte offsets of random blocks of the region. */
  static long[] randomOffsets(int count, long region) {
    long x = 42, blocks = region / FILE_BLOCK;
    long[] offsets = new long[count];
    for (int i = 0; i < count; i++) {
      x = x * 6364136223846793005L + 1442695040888963407L;  // mod 2^64: Java's long wraps
      offsets[i] = ((x >>> 33) % blocks) * FILE_BLOCK;
    }
    return offsets;
  }

  /** Fills buf (from 0 to its capacity) with the blocks that start at firstBlock. */
  // One Arrays.fill and one bulk put per block, so that filling costs next to nothing beside
  // the writes.
  static void fillBlocks(ByteBuffer buf, long firstBlock) {
    byte[] block = new byte[FILE_BLOCK];
    for (int b = 0; b < buf.capacity() / FILE_BLOCK; b++) {
      java.util.Arrays.fill(block, (byte) (firstBlock + b));
      buf.put(b * FILE_BLOCK, block);
    }
    buf.clear();
  }

  static long filesSeqRead(boolean quick) throws IOException {
    try (FileChannel ch = FileChannel.open(filesEnvPath("TPL_BENCH_FILE"), StandardOpenOption.READ)) {
      ByteBuffer buf = ByteBuffer.allocateDirect(FILE_SEQ_CHUNK);
      long limit = filesReadBytes(quick), total = 0;
      while (total < limit) {
        buf.clear().limit((int) Math.min(FILE_SEQ_CHUNK, limit - total));
        int n = ch.read(buf);
        if (n <= 0) break;
        total += n;
      }
      return total;
    }
  }

  /** One block at offset into buf (a positional read: the channel's position is not used). */
  static void readBlock(FileChannel ch, ByteBuffer buf, long offset) throws IOException {
    buf.clear();
    while (buf.hasRemaining()) {
      if (ch.read(buf, offset + buf.position()) < 0) throw new IOException("end of file at " + offset);
    }
  }

  // The random reads split over `readers`: 1 reads on the calling thread; more start a virtual
  // thread each on the one FileChannel (positional reads are safe to issue concurrently). A file
  // read blocks the virtual thread's carrier (no poller for files; the JDK may add a carrier for
  // the time it blocks).
  static long filesRandRead(boolean quick, int readers) throws Exception {
    try (FileChannel ch = FileChannel.open(filesEnvPath("TPL_BENCH_FILE"), StandardOpenOption.READ)) {
      long[] offsets = randomOffsets(pick(quick, 100_000, 5_000), filesReadBytes(quick));
      long[] sums = new long[readers];
      List<Thread> ts = new ArrayList<>(readers);
      List<Throwable> errors = new CopyOnWriteArrayList<>();
      for (int r = 0; r < readers; r++) {
        int idx = r, lo = offsets.length * r / readers, hi = offsets.length * (r + 1) / readers;
        Runnable body = () -> {
          ByteBuffer buf = ByteBuffer.allocateDirect(FILE_BLOCK);
          long sum = 0;
          try {
            for (int i = lo; i < hi; i++) {
              readBlock(ch, buf, offsets[i]);
              sum += buf.get(0) & 0xFF;
            }
          } catch (IOException e) {
            errors.add(e);
          }
          sums[idx] = sum;
        };
        if (readers == 1) body.run();
        else ts.add(Thread.ofVirtual().start(body));
      }
      for (Thread t : ts) t.join();
      if (!errors.isEmpty()) throw new IOException(errors.get(0));
      long sum = 0;
      for (long s : sums) sum += s;
      return sum;
    }
  }

  static void writeAll(FileChannel ch, ByteBuffer buf, long position) throws IOException {
    while (buf.hasRemaining()) {
      if (position < 0) ch.write(buf);
      else ch.write(buf, position + buf.position());
    }
  }

  static long filesSeqWrite(boolean quick) throws IOException {
    try (FileChannel ch = FileChannel.open(filesEnvPath("TPL_BENCH_WRITE_FILE"), StandardOpenOption.WRITE,
        StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING)) {
      ByteBuffer chunk = ByteBuffer.allocateDirect(FILE_SEQ_CHUNK);
      long size = quick ? 16L << 20 : 64L << 20, total = 0;
      for (; total < size; total += FILE_SEQ_CHUNK) {
        fillBlocks(chunk, total / FILE_BLOCK);
        writeAll(ch, chunk, -1);
      }
      return total;
    }
  }

  /** Rewrites random blocks of the read file in place, each with the bytes it holds. */
  static long filesRandWrite(boolean quick) throws IOException {
    try (FileChannel ch = FileChannel.open(filesEnvPath("TPL_BENCH_FILE"), StandardOpenOption.WRITE)) {
      ByteBuffer block = ByteBuffer.allocateDirect(FILE_BLOCK);
      long total = 0;
      for (long off : randomOffsets(pick(quick, 25_000, 1_000), filesReadBytes(quick))) {
        fillBlocks(block, off / FILE_BLOCK);
        writeAll(ch, block, off);
        total += FILE_BLOCK;
      }
      return total;
    }
  }

  // ---- servers of the server groups (--serve; bench/peers/README.md, "Server groups") ----------
  // A virtual thread per connection on blocking java.net.Socket streams: a read or write that
  // would block parks the virtual thread, and the JDK's poller (epoll) unparks it when the socket
  // is ready, so that a few carrier threads (one per core) serve every connection.
  interface Handler { void handle(Socket s) throws Exception; }

  record Server(String kind, String name, Handler handler) {}

  // A sync_over_async_server request: a fixed-size message echoed back; one whose first byte is
  // 'B' is answered after the handler has waited synchronously for a 100 ms delay (seed 002).
  static final int FRAMED_MESSAGE_SIZE = 64, BLOCKING_HANDLER_WAIT_MS = 100;

  static void echo(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    OutputStream out = s.getOutputStream();
    byte[] buf = new byte[4096];
    for (int n; (n = in.read(buf)) > 0; ) out.write(buf, 0, n);
  }

  // CompletableFuture.join of a future that the JDK's delayer thread completes 100 ms later: the
  // Java form of seed 002's Task.Delay(100).Wait(). join parks the virtual thread, which frees its
  // carrier for the other connections (no thread is added).
  static void blockingEcho(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    OutputStream out = s.getOutputStream();
    byte[] buf = new byte[FRAMED_MESSAGE_SIZE];
    while (in.readNBytes(buf, 0, FRAMED_MESSAGE_SIZE) == FRAMED_MESSAGE_SIZE) {
      if (buf[0] == 'B') {
        new CompletableFuture<Void>().completeOnTimeout(null, BLOCKING_HANDLER_WAIT_MS, TimeUnit.MILLISECONDS).join();
      }
      out.write(buf);
    }
  }

  static final byte[] HELLO_RESPONSE = ("HTTP/1.1 200 OK\r\nServer: Java\r\nContent-Type: text/plain\r\n"
      + "Content-Length: 13\r\n\r\nHello, World!").getBytes(StandardCharsets.US_ASCII);
  static final byte[] END_OF_HEADERS = "\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

  // HTTP/1.1 with the minimal parser of the C# peer: every request ends at its empty line (GET, no
  // body) and is answered "Hello, World!"; the answers to the requests that one read completed go
  // out in one write, in order (pipelining); a request cut by the end of a read is completed by
  // the next (the matcher's state carries over).
  static void http(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    OutputStream out = s.getOutputStream();
    byte[] buf = new byte[4096];
    byte[] answers = new byte[HELLO_RESPONSE.length * 16];
    int matched = 0;  // bytes of END_OF_HEADERS seen so far
    for (int n; (n = in.read(buf)) > 0; ) {
      int requests = 0;
      for (int i = 0; i < n; i++) {
        if (buf[i] == END_OF_HEADERS[matched]) matched++;
        else matched = buf[i] == '\r' ? 1 : 0;
        if (matched == END_OF_HEADERS.length) {
          requests++;
          matched = 0;
        }
      }
      if (requests == 0) continue;
      if (answers.length < requests * HELLO_RESPONSE.length) answers = new byte[requests * HELLO_RESPONSE.length];
      for (int r = 0; r < requests; r++)
        System.arraycopy(HELLO_RESPONSE, 0, answers, r * HELLO_RESPONSE.length, HELLO_RESPONSE.length);
      out.write(answers, 0, requests * HELLO_RESPONSE.length);
    }
  }

  static final List<Server> SERVERS = List.of(
      new Server("echo", "virtual thread per connection (java.net.Socket)", Peer::echo),
      new Server("plaintext", "virtual thread per connection (java.net.Socket), minimal parser", Peer::http),
      new Server("sync_over_async_server", "virtual thread per connection, CompletableFuture.join() of a 100 ms delay",
          Peer::blockingEcho));

  static void serve(String kind, String name) throws IOException {
    for (Server server : SERVERS) {
      if (!server.kind().equals(kind) || !server.name().equals(name)) continue;
      // backlog 4096 (the kernel caps it at somaxconn): echo_1000 connects 1,000 clients at once,
      // and the default of 50 would leave some waiting for SYN retries
      ServerSocket listener = new ServerSocket(0, 4096, InetAddress.getByName("127.0.0.1"));
      System.out.println("listening on 127.0.0.1:" + listener.getLocalPort());
      System.out.flush();
      for (;;) {
        Socket s = listener.accept();
        s.setTcpNoDelay(true);  // as Go's net and the C# peer: no Nagle delay on small answers
        Thread.ofVirtual().start(() -> {
          try (s) {
            server.handler().handle(s);
          } catch (Exception e) {
            // a reset ends this connection only
          }
        });
      }
    }
    System.err.println("no server " + kind + " / " + name);
    System.exit(2);
  }

  static final List<Method> METHODS = List.of(
      new Method("chain", "CompletableFuture.thenApply per link", (q, r) -> chain(pick(q, 1_000_000, 100_000))),
      new Method("chain_channels", "virtual thread + SynchronousQueue per link", (q, r) -> chainChannels(pick(q, 1_000_000, 100_000))),
      new Method("skynet", "ForkJoinPool RecursiveTask", (q, r) -> ForkJoinPool.commonPool().invoke(new Skynet(0, pick(q, 1_000_000, 100_000)))),
      new Method("skynet", "ForkJoinPool(cores) RecursiveTask", (q, r) -> FORK_JOIN.invoke(new Skynet(0, pick(q, 1_000_000, 100_000)))),
      // A virtual thread per node (skynetVirtual) is ~15x slower than ForkJoin here; ForkJoin is
      // Java's idiom for fork-join, so only it runs (keeps `make bench` under 20 minutes).
      new Method("fib30", "ForkJoinPool(cores) RecursiveTask, fork + compute", (q, r) -> FORK_JOIN.invoke(new Fib(pick(q, 30, 25)))),
      new Method("fib35", "ForkJoinPool(cores) RecursiveTask, fork + compute", (q, r) -> FORK_JOIN.invoke(new Fib(pick(q, 35, 30)))),
      new Method("recursive_count", "CompletableFuture.supplyAsync per level", (q, r) -> count(pick(q, 1_000_000, 100_000)).join()),
      new Method("yield_storm", "virtual threads + Thread.yield()", (q, r) -> yieldStorm(pick(q, 1000, 100), 1000)),
      new Method("ping_pong", "2 virtual threads, 2 SynchronousQueues", (q, r) -> pingPong(pick(q, 100_000, 10_000))),
      new Method("jobs_100", "virtual thread per job, queue fan-in", (q, r) -> jobsFanIn(pick(q, 100, 20))),
      new Method("jobs_100", "fixed pool of 4 threads", (q, r) -> jobsPool(pick(q, 100, 20), 4)),
      new Method("jobs_100", "fixed pool of 40 threads", (q, r) -> jobsPool(pick(q, 100, 20), 40)),
      new Method("for_async_1m", "IntStream.parallel()", (q, r) -> parallelFor(pick(q, 1_000_000, 100_000))),
      new Method("for_async_1m", "virtual thread per body", (q, r) -> virtualThreadPerBody(pick(q, 1_000_000, 100_000))),
      new Method("channel_spsc_bounded", "ArrayBlockingQueue(1024), virtual threads", (q, r) -> channel(pick(q, 10_000_000, 1_000_000), 1, 1, new ArrayBlockingQueue<>(1024))),
      new Method("channel_spsc_unbounded", "LinkedBlockingQueue, virtual threads", (q, r) -> channel(pick(q, 10_000_000, 1_000_000), 1, 1, new LinkedBlockingQueue<>())),
      new Method("channel_mpmc_bounded", "ArrayBlockingQueue(1024), virtual threads", (q, r) -> channel(pick(q, 10_000_000, 1_000_000), 2, 2, new ArrayBlockingQueue<>(1024))),
      new Method("channel_mpmc_unbounded", "LinkedBlockingQueue, virtual threads", (q, r) -> channel(pick(q, 10_000_000, 1_000_000), 2, 2, new LinkedBlockingQueue<>())),
      new Method("sync_over_async", "common ForkJoinPool, CompletableFuture.join", (q, r) -> syncOverAsyncPool(r), true),
      new Method("sync_over_async", "virtual threads, CompletableFuture.join", (q, r) -> syncOverAsyncVirtual(r), true),
      new Method("barrier", "cached thread pool + CyclicBarrier", (q, r) -> barrier(r, Executors.newCachedThreadPool()), true),
      new Method("barrier", "virtual threads + CyclicBarrier", (q, r) -> barrier(r, Executors.newVirtualThreadPerTaskExecutor()), true),
      new Method("for_async_delay_100", "cores virtual threads take indices, sleep(1 ms)", (q, r) -> forAsyncDelay(100, cores())),
      new Method("for_async_delay_100", "100 virtual threads take indices, sleep(1 ms)", (q, r) -> forAsyncDelay(100, 100)),
      new Method("rw_lock_stress", "ReentrantReadWriteLock, 100 common-pool tasks a round", (q, r) -> rwLockStress(q)),
      new Method("files_seq_read", "FileChannel.read 64 KiB", (q, r) -> filesSeqRead(q)),
      new Method("files_rand_read", "FileChannel.read(buf, position) 4 KiB", (q, r) -> filesRandRead(q, 1)),
      new Method("files_rand_read_16", "16 virtual threads of FileChannel.read(buf, position) 4 KiB", (q, r) -> filesRandRead(q, 16)),
      new Method("files_seq_write", "FileChannel.write 64 KiB", (q, r) -> filesSeqWrite(q)),
      new Method("files_rand_write", "FileChannel.write(buf, position) 4 KiB", (q, r) -> filesRandWrite(q)));

  static long allocated() {
    try {
      var mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
      return mx.getTotalThreadAllocatedBytes();
    } catch (Throwable t) {
      return -1;
    }
  }

  static String esc(String s) { return s.replace("\\", "\\\\").replace("\"", "\\\""); }

  public static void main(String[] args) throws Exception {
    boolean quick = false, list = false, serving = false;
    String group = null, name = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--quick" -> quick = true;
        case "--list" -> list = true;
        case "--run", "--serve" -> {
          if (i + 2 < args.length) {
            serving = args[i].equals("--serve");
            group = args[++i];
            name = args[++i];
          }
        }
        default -> {}
      }
    }
    if (list) {
      for (Method m : METHODS) System.out.println(m.group() + "\t" + m.name());
      for (Server s : SERVERS) System.out.println(s.kind() + "\t" + s.name());
      return;
    }
    if (serving) {
      serve(group, name);
      return;
    }
    for (Method m : METHODS) {
      if (!m.group().equals(group) || !m.name().equals(name)) continue;
      if (!m.noWarmup()) m.body().run(true, new Recorder());
      long a0 = allocated();
      Recorder rec = new Recorder();
      long t0 = System.nanoTime();
      long sum = m.body().run(quick, rec);
      double ms = (System.nanoTime() - t0) / 1e6;
      long a1 = allocated();
      StringBuilder sb = new StringBuilder();
      sb.append(String.format(java.util.Locale.ROOT,
          "{\"group\": \"%s\", \"method\": \"%s\", \"ms\": %.6f, \"checksum\": %d, \"allocated_bytes\": %s",
          esc(m.group()), esc(m.name()), ms, sum, a0 >= 0 && a1 >= 0 ? Long.toString(a1 - a0) : "null"));
      synchronized (rec) {
        if (!rec.starts.isEmpty()) {
          sb.append(", \"starts_ms\": [");
          for (int i = 0; i < rec.starts.size(); i++)
            sb.append(i == 0 ? "" : ", ").append(String.format(java.util.Locale.ROOT, "%.6f", rec.starts.get(i)));
          sb.append("]");
        }
      }
      sb.append("}");
      System.out.println(sb);
      System.out.flush();
      System.exit(0);
    }
    System.err.println("no method " + group + " / " + name);
    System.exit(2);
  }
}
