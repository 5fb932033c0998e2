"""The foundations every wing uses: errors, configuration, schemas, parsing, process helpers.
Public: every module.
"""
