package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fairq/fairq/tenant"
)

// runKeysHash reads one key from stdin and prints its sha256:<hex> form, the
// only form in which a key appears in a configuration file.
func runKeysHash(stdin io.Reader, stdout, stderr io.Writer) int {
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "fairq keys hash: read stdin: %v\n", err)
		return 1
	}
	key := strings.TrimRight(line, "\r\n")
	if key == "" {
		fmt.Fprintln(stderr, "fairq keys hash: no key on stdin (usage: echo -n KEY | fairq keys hash)")
		return 2
	}
	fmt.Fprintln(stdout, tenant.HashKey(key))
	return 0
}

// runKeysHashCmd is `fairq keys hash`.
func runKeysHashCmd(_ context.Context, e env, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: fairq keys hash < keyfile", errUsage)
	}
	if code := runKeysHash(e.stdin, e.stdout, e.stderr); code != 0 {
		return &exitError{code: code} // it said why
	}
	return nil
}
