// Command sluice formats, mounts and operates Sluice volumes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sluicefs/sluice/internal/cli"
)

func main() {
	if err := cli.NewRoot().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "sluice: %v\n", err)
		os.Exit(1)
	}
}
