"""The runner's Python daemon imports pyspark from the installed package, whose bytecode is
cached, rather than from ``pyspark.zip``, which every process compiles again, and takes
Spark's jars, which hold no Python, off its workers' path."""

from __future__ import annotations

from pathlib import Path

import pyspark

from spark_io.runner._daemon import prefer_installed_pyspark, without_spark_jars


def test_the_zips_of_a_pip_installed_pyspark_go_last(tmp_path: Path) -> None:
    home = Path(pyspark.__file__).parent  # SPARK_HOME of a pip-installed pyspark
    zips = [str(home / "python" / "lib" / "pyspark.zip"), str(home / "python/lib/py4j-src.zip")]
    other = str(tmp_path)
    assert prefer_installed_pyspark([*zips, other, "/x/y.zip"]) == [other, "/x/y.zip", *zips]


def test_a_spark_distribution_elsewhere_keeps_its_zip_first(tmp_path: Path) -> None:
    spark_home = tmp_path / "spark-4.0.0-bin-hadoop3"  # not a Python package
    (spark_home / "python" / "lib").mkdir(parents=True)
    path = [str(spark_home / "python" / "lib" / "pyspark.zip"), "/site-packages"]
    assert prefer_installed_pyspark(path) == path


def test_a_folder_named_pyspark_that_is_no_package_keeps_its_zip_first(tmp_path: Path) -> None:
    (tmp_path / "pyspark" / "python" / "lib").mkdir(parents=True)  # no __init__.py
    path = [str(tmp_path / "pyspark" / "python" / "lib" / "pyspark.zip"), "/site-packages"]
    assert prefer_installed_pyspark(path) == path


def test_sparks_jars_leave_the_path() -> None:
    jar = str(Path(pyspark.__file__).parent / "jars" / "spark-core_2.13-4.3.0.jar")
    assert without_spark_jars(["/a", jar, "/b/lib.jar", "/c.zip"]) == ["/a", "/b/lib.jar", "/c.zip"]
