"""The batch indexing job: images in, weighted-term documents out, on GPU or CPU."""
