package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Every pod gets an address in 127.B.N.0/24, where N numbers the nodes and B is a block that
// one cluster holds for its whole life. Two clusters on one machine (parallel test packages,
// a developer's make run beside make test) would otherwise hand the same loopback address to
// two pods, and the simulator of one could not bind the other's address.
const (
	firstBlock = 1
	lastBlock  = 99 // 127.100.0.0/16 is kwok's fallback range
)

// claimLoopbackBlock takes the first block no other cluster holds, by an exclusive, non-
// blocking flock on a per-block file. The lock is released when the file is closed or the
// process dies, so a crashed cluster never leaks its block. Children do not inherit it (Go
// opens files close-on-exec).
func claimLoopbackBlock() (int, *os.File, error) {
	dir := filepath.Join(os.TempDir(), "celld-localcluster-loopback")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	for b := firstBlock; b <= lastBlock; b++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("127.%d.lock", b)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return b, f, nil
		}
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return 0, nil, fmt.Errorf("lock loopback block 127.%d: %w", b, err)
		}
	}
	return 0, nil, fmt.Errorf("every loopback block 127.%d-127.%d is held by another local cluster", firstBlock, lastBlock)
}
