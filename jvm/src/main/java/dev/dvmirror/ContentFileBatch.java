package dev.dvmirror;

import java.io.IOException;
import java.io.UncheckedIOException;
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
 */
public final class ContentFileBatch {
  /** Line prefixes of {@link #stage}: what to do with the file on the rest of the line. */
  public static final String ADD_DATA = "add-data";
  public static final String REMOVE_DATA = "remove-data";
  public static final String ADD_DELETE = "add-delete";
  public static final String REMOVE_DELETE = "remove-delete";

  private ContentFileBatch() {}

  /**
   * Stages every file of {@code lines} in {@code rowDelta}. Each line is {@code <action> TAB <json>},
   * the action one of the constants above. Returns how many files were staged.
   */
  public static int stage(RowDelta rowDelta, String lines, PartitionSpec spec) {
    ObjectMapper mapper = JsonUtil.mapper();
    int staged = 0;
    int start = 0;
    while (start < lines.length()) {
      int end = lines.indexOf('\n', start);
      if (end < 0) {
        end = lines.length();
      }
      if (end > start) {
        String line = lines.substring(start, end);
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
      start = end + 1;
    }
    return staged;
  }

  /** The live delete files of a snapshot, one {@link ContentFileParser} JSON per line. */
  public static String deleteFiles(Table table, long snapshotId) {
    Snapshot snapshot = table.snapshot(snapshotId);
    if (snapshot == null) {
      throw new IllegalArgumentException("no snapshot " + snapshotId + " in " + table.name());
    }
    Map<Integer, PartitionSpec> specs = table.specs();
    StringBuilder out = new StringBuilder();
    for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(manifest, table.io(), specs)) {
        for (DeleteFile file : reader) {
          out.append(ContentFileParser.toJson(file, specs.get(file.specId()))).append('\n');
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return out.toString();
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
