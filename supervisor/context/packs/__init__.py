"""Role packs: a folder with a `pack.yaml` manifest, its roles, templates and context strategies,
shipped with the package or installed from any git repository. A pack is untrusted data: the keys
that route credentials or weaken a protection are refused, its templates render sandboxed."""
