package main

import "fmt"

// Deprecated: Greet goes away in 2.0; see docs/MIGRATION.md.
func Greet() {
	fmt.Println("hello from api")
}

func main() {
	Greet()
}
