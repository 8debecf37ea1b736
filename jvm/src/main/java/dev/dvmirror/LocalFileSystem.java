package dev.dvmirror;

import java.io.IOException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system ({@code file:}, with its checksum files, as {@link
 * org.apache.hadoop.fs.LocalFileSystem}), setting a file's permissions with {@code java.nio} instead
 * of a {@code chmod} process.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem#setPermission}
 * starts {@code chmod} for every file it creates and every directory it makes: an Iceberg commit on a
 * local warehouse writes six files (a manifest, the manifest list, the metadata file and their {@code
 * .crc} files), so six processes forked from the driver's JVM, about 60 % of a small commit's time
 * (benchmarks/fleet.py). The permissions set are the same ones (the mode Hadoop computed, umask
 * applied); only how they are set changes. With the native library, on a file system without POSIX
 * permissions, or for a sticky bit (which {@code java.nio} cannot set), Hadoop's own code runs. Spark uses it for {@code file:} through {@code
 * spark.hadoop.fs.file.impl} (dv_assets/mirror/spark.py).
 */
public final class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw file system under the checksums, its {@code setPermission} without a process. */
  static final class Raw extends RawLocalFileSystem {
    private static final boolean POSIX =
        FileSystems.getDefault().supportedFileAttributeViews().contains("posix");

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || !POSIX || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
    }
  }

  /** Hadoop's user, group and other actions as POSIX permissions (sticky bit and the like have none). */
  static Set<PosixFilePermission> posix(FsPermission permission) {
    Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
    add(out, permission.getUserAction(), PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
        PosixFilePermission.OWNER_EXECUTE);
    add(out, permission.getGroupAction(), PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE,
        PosixFilePermission.GROUP_EXECUTE);
    add(out, permission.getOtherAction(), PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
        PosixFilePermission.OTHERS_EXECUTE);
    return out;
  }

  private static void add(
      Set<PosixFilePermission> out,
      FsAction action,
      PosixFilePermission read,
      PosixFilePermission write,
      PosixFilePermission execute) {
    if (action.implies(FsAction.READ)) {
      out.add(read);
    }
    if (action.implies(FsAction.WRITE)) {
      out.add(write);
    }
    if (action.implies(FsAction.EXECUTE)) {
      out.add(execute);
    }
  }
}
