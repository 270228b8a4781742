#include <tpl/tpl.hpp>
#include <cstdio>
tpl::task<int> answer() { co_await tpl::yield(); co_return 42; }
int main() { int v = tpl::sync_wait(answer()); std::printf("%d\n", v); return v == 42 ? 0 : 1; }
