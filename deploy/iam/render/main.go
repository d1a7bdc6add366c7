// Command render writes fairq's IAM policies from package iam: one JSON
// policy per role for a queue prefix and, with -terraform, the Terraform
// locals the module in deploy/terraform builds its policies from.
//
//	go generate ./deploy/iam                                   # the committed files (prefix fairq)
//	go run ./deploy/iam/render -prefix acme -dir /tmp/acme-iam # the policies for sqs.queue_prefix acme
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairq/fairq/deploy/iam"
)

func main() {
	prefix := flag.String("prefix", iam.PrefixDefault, "queue prefix (sqs.queue_prefix) the policies allow")
	dir := flag.String("dir", ".", "directory to write gateway.json, worker.json and admin.json to")
	tf := flag.String("terraform", "", "also write the Terraform locals of the roles' actions to this file")
	flag.Parse()
	if err := run(*prefix, *dir, *tf); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(prefix, dir, tf string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range iam.Roles {
		b, err := r.PolicyJSON(prefix)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, r.Name+".json"), b, 0o644); err != nil {
			return err
		}
	}
	if tf == "" {
		return nil
	}
	return os.WriteFile(tf, iam.Terraform(), 0o644)
}
