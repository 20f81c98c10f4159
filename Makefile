# The release artifacts: static Linux binaries (x86_64, aarch64), the .deb, the RPMs, the OCI images,
# SHA256SUMS and the SBOM, into target/dist (contrib/dist/build says what each needs).
dist:
	contrib/dist/build

.PHONY: dist
