package testnet

import "syscall"

// procAttr makes a node process die with the Net's process, so that a
// crashed or killed test leaves no node running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
