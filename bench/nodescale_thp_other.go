//go:build !linux

package bench

// adviseHugePages does nothing but on Linux (nodescale_thp_linux.go).
func adviseHugePages(bool) {}
