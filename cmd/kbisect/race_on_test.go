//go:build race

package main

// raceOn says the tests run under the race detector, which makes the
// longest single-machine end-to-end runs several times slower than they
// are worth there (their concurrency is raced by the others).
const raceOn = true
