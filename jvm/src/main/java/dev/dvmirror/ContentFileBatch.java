package dev.dvmirror;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ContentFileParser;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
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

  /** Lines of {@link #stageDeletionVectors}: the Puffin file the following DV lines are blobs of. */
  public static final String PUFFIN = "puffin";

  /**
   * Stages the deletion vectors listed in the local file {@code linesFile} in {@code rowDelta}, in a
   * compact form: a DV has only a few fields, and building it with Iceberg's own {@link
   * FileMetadata#deleteFileBuilder} costs a small fraction of parsing its {@link ContentFileParser}
   * JSON (a JSON tree per file, and a new partition tuple whose Avro schema is converted each time).
   * Lines:
   *
   * <ul>
   *   <li>{@code puffin TAB <spec id> TAB <file size> TAB <path>}: the Puffin file of the DV lines
   *       that follow (the path last, so it may hold tabs);
   *   <li>{@code add-delete|remove-delete TAB <content offset> TAB <content size> TAB <cardinality>
   *       TAB <partition JSON> TAB <referenced data file>}: one DV of that Puffin file.
   * </ul>
   *
   * Each distinct partition JSON is parsed once, by {@link ContentFileParser} itself, so a partition
   * value is read exactly as on the JSON path. Returns how many DVs were staged.
   */
  public static int stageDeletionVectors(RowDelta rowDelta, String linesFile, PartitionSpec spec)
      throws IOException {
    ObjectMapper mapper = JsonUtil.mapper();
    Map<String, StructLike> partitions = new HashMap<>();
    // One builder for every DV: every field a DV has is set again before each build, and a new
    // builder of a partitioned spec would build a new partition tuple (its Avro schema) each time.
    FileMetadata.Builder builder =
        FileMetadata.deleteFileBuilder(spec).ofPositionDeletes().withFormat(FileFormat.PUFFIN);
    boolean inPuffin = false;
    int staged = 0;
    try (BufferedReader reader = Files.newBufferedReader(Path.of(linesFile), StandardCharsets.UTF_8)) {
      String line;
      while ((line = reader.readLine()) != null) {
        if (line.isEmpty()) {
          continue;
        }
        if (line.startsWith(PUFFIN + "\t")) {
          String[] puffin = line.split("\t", 4);
          if (puffin.length != 4 || Integer.parseInt(puffin[1]) != spec.specId()) {
            throw new IllegalArgumentException(
                "Puffin line not of partition spec " + spec.specId() + ": " + abbreviate(line));
          }
          builder.withFileSizeInBytes(Long.parseLong(puffin[2])).withPath(puffin[3]);
          inPuffin = true;
          continue;
        }
        String[] fields = line.split("\t", 6);
        if (fields.length != 6 || !inPuffin) {
          throw new IllegalArgumentException("deletion vector line out of place: " + abbreviate(line));
        }
        String partitionJson = fields[4];
        StructLike partition = partitions.get(partitionJson);
        if (partition == null) {
          partition = parsePartition(mapper, partitionJson, spec);
          partitions.put(partitionJson, partition);
        }
        DeleteFile dv =
            builder
                .withContentOffset(Long.parseLong(fields[1]))
                .withContentSizeInBytes(Long.parseLong(fields[2]))
                .withRecordCount(Long.parseLong(fields[3]))
                .withPartition(partition)
                .withReferencedDataFile(fields[5])
                .build();
        switch (fields[0]) {
          case ADD_DELETE -> rowDelta.addDeletes(dv);
          case REMOVE_DELETE -> rowDelta.removeDeletes(dv);
          default -> throw new IllegalArgumentException("unknown deletion vector action: " + fields[0]);
        }
        staged++;
      }
    }
    return staged;
  }

  /** A partition tuple as {@link ContentFileParser} reads it, from the JSON of a DV of that partition. */
  private static StructLike parsePartition(ObjectMapper mapper, String partitionJson, PartitionSpec spec) {
    String dv =
        "{\"spec-id\":"
            + spec.specId()
            + ",\"content\":\"position-deletes\",\"file-path\":\"p\",\"file-format\":\"puffin\","
            + "\"partition\":"
            + partitionJson
            + ",\"file-size-in-bytes\":0,\"record-count\":0,\"referenced-data-file\":\"d\","
            + "\"content-offset\":0,\"content-size-in-bytes\":0}";
    return parse(mapper, dv, spec).partition();
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
