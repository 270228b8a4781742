module tplbench/loadgen

go 1.23
