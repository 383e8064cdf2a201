/*
 * Delta's log store for local paths, listing a log as Delta's own does but reading the
 * status of only the files it returns.
 *
 * Delta finds a table's newest commits with `listFrom(<log>/<version>.)`: on a Hadoop file
 * system that lists the whole `_delta_log` folder, reads the status of every file in it
 * (three calls into the file system each, on a local disk), keeps the names from the given
 * one on and sorts them. A streaming reader asks at every trigger, an idle one's too, and a
 * continuous run's log grows by two files a commit: 30,000 files cost an idle stream about
 * 0.4 s of CPU a second (docs/benchmarks.md, "A table's growing log"). This store reads
 * the folder's names, keeps and sorts them the same way, and asks the file system for the
 * status of those alone. Writes, reads and every other file system go to Delta's own
 * `LocalLogStore`, which local sessions use otherwise.
 *
 * Built by `warehouse jars fetch` (warehouse/runtime/local_fs.py) against the Hadoop client
 * of the installed pyspark and the cached delta-storage jar; sessions on a local master with
 * the native jars name it as `spark.delta.logStore.file.impl`.
 */
package warehouse.delta;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

import io.delta.storage.LocalLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

public class LocalListingLogStore extends LocalLogStore {

  public LocalListingLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    Path parent = path.getParent();
    File dir = localFile(fs, parent);
    if (dir == null) {
      return super.listFrom(path, hadoopConf);
    }
    String[] names = dir.list();
    if (names == null) {
      if (!dir.isDirectory()) {
        throw new FileNotFoundException("No such file or directory: " + parent);
      }
      throw new IOException("Cannot list " + dir);
    }
    String start = path.getName();
    Arrays.sort(names);
    List<FileStatus> out = new ArrayList<>();
    for (String name : names) {
      if (name.compareTo(start) < 0) {
        continue;
      }
      Path file = new Path(parent, name);
      if (fs instanceof ChecksumFileSystem && ((ChecksumFileSystem) fs).isChecksumFile(file)) {
        continue; // Hadoop's listing leaves its checksum files out too
      }
      try {
        out.add(fs.getFileStatus(file));
      } catch (FileNotFoundException e) {
        // Gone since the folder was read: Hadoop's listing leaves such a file out too.
      }
    }
    return out.iterator();
  }

  private static File localFile(FileSystem fs, Path path) {
    if (fs instanceof LocalFileSystem) {
      return ((LocalFileSystem) fs).pathToFile(path);
    }
    if (fs instanceof RawLocalFileSystem) {
      return ((RawLocalFileSystem) fs).pathToFile(path);
    }
    return null;
  }
}
