"""Spark helpers shared by spark_jobs/* and the pipeline."""
