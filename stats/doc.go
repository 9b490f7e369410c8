// Package stats summarises samples: the median, percentiles, the mean, the
// least and the greatest value, with one definition of each for the whole
// module, so that a median in one table means what it means in another.
//
// Definitions, for a sample of n values sorted in increasing order
// v[0] ≤ … ≤ v[n−1]:
//
//   - the median is the middle value v[(n−1)/2] for odd n, and the mean of
//     the two middle values (v[n/2−1] + v[n/2]) / 2 for even n;
//   - the p-th percentile (0 ≤ p ≤ 100) is by nearest rank: the ⌈p·n/100⌉-th
//     smallest value, v[⌈p·n/100⌉ − 1], and v[0] for p = 0. It is always one
//     of the samples, so for an integer or a duration it keeps its type; the
//     50th percentile of an even count is the lower middle value, which is
//     not the median: call Median for the median;
//   - the mean is the sum divided by n.
//
// Every figure of an empty sample is zero.
//
// Sort a sample once and read as many figures from it as needed:
//
//	s := stats.Sort(rtts) // a sorted copy; rtts is left alone
//	med, p95, worst := s.Median(), s.Percentile(95), s.Max()
//	mean := stats.Mean(rtts)
//
// The package has no dependencies within the module, so every layer may
// use it.
package stats
