// Command podfingerprint reads pod sets as JSON on stdin ([[["namespace", "name"], ...], ...]) and prints, one
// line per set, the signature the podfingerprint module computes for it: the reference podpin's
// agent/nrt/fingerprint.py is compared with.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/k8stopologyawareschedwg/podfingerprint"
)

func main() {
	var sets [][][2]string
	if err := json.NewDecoder(os.Stdin).Decode(&sets); err != nil {
		fmt.Fprintln(os.Stderr, "podfingerprint: stdin:", err)
		os.Exit(2)
	}
	for _, pods := range sets {
		fp := podfingerprint.NewFingerprint(len(pods))
		for _, pod := range pods {
			if err := fp.Add(pod[0], pod[1]); err != nil {
				fmt.Fprintln(os.Stderr, "podfingerprint:", err)
				os.Exit(1)
			}
		}
		fmt.Println(fp.Sign())
	}
}
