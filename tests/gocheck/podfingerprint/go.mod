// The reference pod fingerprint for tests/unit/nrt/test_fingerprint_go.py; nothing here is imported by podpin.
module podpin.test/gocheck/podfingerprint

go 1.19

require github.com/k8stopologyawareschedwg/podfingerprint v0.2.2

require github.com/OneOfOne/xxhash v1.2.8 // indirect
