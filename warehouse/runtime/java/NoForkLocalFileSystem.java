/*
 * Hadoop's local file system, with permissions set through Java instead of a process.
 *
 * Without Hadoop's native library (pip's pyspark has none), RawLocalFileSystem sets the
 * permission of every file and directory it creates by starting `chmod`: two processes
 * per file with its checksum file, about 19 per micro-batch of a streaming aggregation
 * into Delta (its offsets and commit logs, its state, Delta's log and data files). This class
 * sets them with java.nio instead, and leaves every other call to Hadoop. A permission
 * java.nio cannot express (sticky, setuid or setgid bits) and a file system without
 * POSIX attributes go to Hadoop's own way.
 *
 * Built by `warehouse jars fetch` (warehouse/runtime/local_fs.py) against the Hadoop
 * client of the installed pyspark; sessions on a local master use it as `fs.file.impl`.
 */
package warehouse.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class NoForkLocalFileSystem extends LocalFileSystem {

  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) local file system underneath, with `setPermission` in Java. */
  public static class Raw extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      PosixFileAttributeView view = (mode & ~0777) != 0 ? null
          : Files.getFileAttributeView(pathToFile(p).toPath(), PosixFileAttributeView.class);
      if (view == null) {
        super.setPermission(p, permission);
        return;
      }
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          set.add(BITS[bit]);
        }
      }
      view.setPermissions(set);
    }
  }
}
