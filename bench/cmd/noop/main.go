// Command noop does nothing. The benchmark harness times it as the start-up
// cost of a Go program, which every jobs command pays too.
package main

func main() {}
