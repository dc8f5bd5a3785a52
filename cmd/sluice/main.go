// Command sluice formats, mounts and operates Sluice volumes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sluicefs/sluice/internal/cli"
)

func main() {
	if cli.IsMountHelper(os.Args[0]) {
		// mount -t sluice, and /etc/fstab: see docs/mounting.md.
		if err := cli.MountHelper(context.Background(), os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := cli.NewRoot().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "sluice: %v\n", err)
		os.Exit(1)
	}
}
