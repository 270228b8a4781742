/* rsswrap OUTFILE CMD [ARGS...]: runs CMD, writes its peak RSS (KB, from wait4) to OUTFILE and
 * exits with its status. bench/run.py starts every measured program through it: a program
 * forked straight from Python would count Python's own resident memory as its peak (Linux
 * records the pre-exec address space's high-water mark in ru_maxrss). */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rsswrap OUTFILE CMD [ARGS...]\n");
    return 125;
  }
  pid_t pid = fork();
  if (pid < 0) return 125;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    _exit(127);
  }
  /* forward termination requests (run.py's timeout kills us) */
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
  }
  FILE* f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "%ld\n", ru.ru_maxrss);
    fclose(f);
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}
