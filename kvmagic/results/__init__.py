"""What a benchmark found, as data with its statistics, and its renderings: rows and notes, files, HTML."""
