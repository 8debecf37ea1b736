package dev.dvmirror;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ContentFileParser;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.util.JsonUtil;

/**
 * Content files cross py4j in one call per version instead of several round trips per file.
 *
 * <p>Both directions use Iceberg's own {@link ContentFileParser} JSON, one file per line, so Iceberg
 * builds its {@code DataFile}/{@code DeleteFile} objects itself exactly as it would from single files.
 * The lines travel through a local file that the Python driver and its JVM (always on one machine)
 * share, streamed on both sides, rather than as one large py4j string.
 */
public final class ContentFileBatch {
  /** Line prefixes of {@link #stage}: what to do with the file on the rest of the line. */
  public static final String ADD_DATA = "add-data";
  public static final String REMOVE_DATA = "remove-data";
  public static final String ADD_DELETE = "add-delete";
  public static final String REMOVE_DELETE = "remove-delete";

  private ContentFileBatch() {}

  /**
   * Stages every file listed in the local file {@code linesFile} in {@code rowDelta}, read line by line
   * (a version of 100,000 files never becomes one string on either side of py4j). Each line is
   * {@code <action> TAB <json>}, the action one of the constants above. Returns how many were staged.
   */
  public static int stage(RowDelta rowDelta, String linesFile, PartitionSpec spec) throws IOException {
    ObjectMapper mapper = JsonUtil.mapper();
    int staged = 0;
    try (BufferedReader reader = Files.newBufferedReader(Path.of(linesFile), StandardCharsets.UTF_8)) {
      String line;
      while ((line = reader.readLine()) != null) {
        if (line.isEmpty()) {
          continue;
        }
        int tab = line.indexOf('\t');
        if (tab < 0) {
          throw new IllegalArgumentException("content file line without an action: " + abbreviate(line));
        }
        String action = line.substring(0, tab);
        ContentFile<?> file = parse(mapper, line.substring(tab + 1), spec);
        switch (action) {
          case ADD_DATA -> rowDelta.addRows((DataFile) file);
          case REMOVE_DATA -> rowDelta.removeRows((DataFile) file);
          case ADD_DELETE -> rowDelta.addDeletes((DeleteFile) file);
          case REMOVE_DELETE -> rowDelta.removeDeletes((DeleteFile) file);
          default -> throw new IllegalArgumentException("unknown content file action: " + action);
        }
        staged++;
      }
    }
    return staged;
  }

  /**
   * Writes the live delete files of a snapshot to the local file {@code outFile}, one {@link
   * ContentFileParser} JSON per line; returns how many.
   */
  public static int writeDeleteFiles(Table table, long snapshotId, String outFile) throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    if (snapshot == null) {
      throw new IllegalArgumentException("no snapshot " + snapshotId + " in " + table.name());
    }
    Map<Integer, PartitionSpec> specs = table.specs();
    int written = 0;
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(outFile), StandardCharsets.UTF_8)) {
      for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
        try (ManifestReader<DeleteFile> reader =
            ManifestFiles.readDeleteManifest(manifest, table.io(), specs)) {
          for (DeleteFile file : reader) {
            out.write(ContentFileParser.toJson(file, specs.get(file.specId())));
            out.write('\n');
            written++;
          }
        }
      }
    }
    return written;
  }

  /** The locations of a delete manifest's live delete files, one per line. */
  public static String deleteFileLocations(Table table, ManifestFile manifest) {
    StringBuilder out = new StringBuilder();
    try (ManifestReader<DeleteFile> reader =
        ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
      for (DeleteFile file : reader) {
        out.append(file.location()).append('\n');
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  private static ContentFile<?> parse(ObjectMapper mapper, String json, PartitionSpec spec) {
    try {
      return ContentFileParser.fromJson(mapper.readTree(json), spec);
    } catch (IOException e) {
      throw new UncheckedIOException("unreadable content file JSON: " + abbreviate(json), e);
    }
  }

  private static String abbreviate(String text) {
    return text.length() <= 200 ? text : text.substring(0, 200) + "…";
  }
}
