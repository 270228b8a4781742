module tplbench/peer

go 1.23
