// Package cputime reads the CPU time of the running process, finer than
// /proc's clock ticks (10 ms): the benchmarks' CPU columns and a testnet
// node process's report use it.
package cputime
