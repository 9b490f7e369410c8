// Package bench measures the overlay: the quality of superpeer placements
// against baselines computed in the same run (random placement, and the
// offline k-median placement that knows the whole latency matrix), and, in
// time, the suites of `peer bench`.
package bench
