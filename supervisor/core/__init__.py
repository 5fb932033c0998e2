"""The foundations every wing uses: errors, settings, schemas, parsing, process helpers."""
