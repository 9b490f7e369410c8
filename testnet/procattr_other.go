//go:build !linux

package testnet

import "syscall"

// procAttr is nil: only Linux can tie a node process's life to the Net's
// process; elsewhere a crashed test may leave node processes behind, which
// stop when their standard input ends.
func procAttr() *syscall.SysProcAttr { return nil }
