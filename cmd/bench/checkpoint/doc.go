// Command checkpoint compares checkpoint.FSStore.Save with two floors for
// the same bytes, measured side by side in one run: a bare
// write+fsync+rename, and the honest floor write+fsync+rename+directory
// fsync (what durability of a new file needs). It also times Bootstrap of a
// store holding 100 generations.
//
//	go run ./cmd/bench/checkpoint [-n 500] [-size 4096] [-dir /var/tmp]
//
// Run it on the file system a host would use: the ratio depends on how
// expensive fsync of a file and of a directory are there.
package main
