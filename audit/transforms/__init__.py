"""DataFrame -> DataFrame transforms, one module per system; spark_jobs/* do the I/O."""
